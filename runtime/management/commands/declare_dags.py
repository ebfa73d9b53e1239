"""``manage.py declare_dags FILE``: load a DAG manifest (``assets_app.services.dags.manifest``);
``manage.py declare_dags --dags-folder DIR``: load real Airflow DAG files, once.

The command lives in ``runtime`` (not beside the domain's other commands in ``assets_app``)
because ``--dags-folder`` starts processes: it runs the DAG processor's loader,
:func:`runtime.dag_processing.dag_folder_load` — the one ``manage.py dag_processor`` runs
pass after pass — and the domain never imports ``runtime``. The manifest path is a plain call
of a domain service, which a runtime command may make (layers point down); keeping both forms
in one command keeps the documented name and arguments.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from assets_app.management.base import domain_errors, progress_bar
from assets_app.services.dags.dag_files import FileOutcome, FileResult
from assets_app.services.dags.declare import DECLARE_STEPS, dags_declare_from_file
from runtime.dag_processing import dag_folder_load


class Command(BaseCommand):
    help = (
        "Load a YAML or JSON manifest of DAGs (tasks with inlets/outlets, asset schedules) and "
        "store them with their asset references, like Airflow's DAG processor. Idempotent; DAGs "
        "loaded earlier from the same file but missing now are marked stale. Shows its steps "
        "on a progress bar when stderr is a terminal; prints a one-line summary on stdout, "
        "warnings and log lines on stderr. With --dags-folder DIR instead: parse every Airflow "
        "DAG file of DIR with Airflow's own parser (in a subprocess) and declare what they hold; "
        "a file that fails to import is recorded as an import error and its DAGs keep their "
        "last good version: the good files are loaded, each error is printed, and the command "
        "exits with status 1."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", nargs="?", help="path of the manifest (.yaml/.yml, or .json)")
        parser.add_argument(
            "--dags-folder",
            metavar="DIR",
            help="load the Airflow DAG files (*.py) of this folder instead of a manifest",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if bool(options["file"]) == bool(options["dags_folder"]):
            raise CommandError("give either a manifest FILE or --dags-folder DIR (not both)")
        if options["dags_folder"]:
            self._load_folder(Path(options["dags_folder"]))
            return
        with (
            domain_errors(),
            progress_bar(self, total=len(DECLARE_STEPS), desc="declaring", unit="step") as bar,
        ):

            def show(step: str) -> None:
                if bar is not None:
                    bar.set_postfix_str(step, refresh=False)
                    bar.update(DECLARE_STEPS.index(step) - bar.n)

            result = dags_declare_from_file(path=options["file"], progress=show)
            if bar is not None:
                bar.update(len(DECLARE_STEPS) - bar.n)
        for warning in result.warnings:
            self.stderr.write(self.style.WARNING(warning))
        stale = f"; marked stale: {', '.join(result.stale_dag_ids)}" if result.stale_dag_ids else ""
        self.stdout.write(
            self.style.SUCCESS(
                f"Declared {len(result.dag_ids)} DAG(s) from {result.fileloc}: "
                f"{result.assets_created} asset(s) created, {result.assets_updated} updated, "
                f"{result.aliases_created} alias(es) created, {result.activated} asset(s) "
                f"activated, {result.deactivated} deactivated{stale}"
            )
        )

    def _load_folder(self, folder: Path) -> None:
        with (
            domain_errors(),
            progress_bar(self, total=None, desc="loading", unit="file") as bar,
        ):

            def on_file(result: FileResult) -> None:
                if bar is None:
                    report_file(self, result, unchanged_errors=True)
                    return
                with bar.external_write_mode():  # the line above the bar, never into it
                    report_file(self, result, unchanged_errors=True)
                bar.update(1)

            result = dag_folder_load(folder=folder, on_file=on_file)
        errors = result.count(FileOutcome.IMPORT_ERROR) + result.count(
            FileOutcome.IMPORT_ERROR_UNCHANGED
        )
        style = self.style.WARNING if errors else self.style.SUCCESS
        self.stdout.write(
            style(
                f"Loaded {result.folder}: {len(result.files)} file(s), "
                f"{result.count(FileOutcome.DECLARED)} declared, "
                f"{result.count(FileOutcome.UNCHANGED)} unchanged, {errors} with import errors, "
                f"{result.count(FileOutcome.STALE)} gone (DAGs marked stale)"
            )
        )
        failed = [
            r.path
            for r in result.files
            if r.outcome in (FileOutcome.IMPORT_ERROR, FileOutcome.IMPORT_ERROR_UNCHANGED)
        ]
        if failed:  # after the good files are stored: a script or CI sees the failure
            raise CommandError(
                f"{len(failed)} DAG file(s) failed to import (errors above): {', '.join(failed)}"
            )


def report_file(
    command: BaseCommand, result: FileResult, *, unchanged_errors: bool = False
) -> None:
    """One line per DAG file on stdout; an import error's text and warnings on stderr (shared
    with ``manage.py dag_processor``, which prints an error once, not again while it stays the
    same; ``unchanged_errors`` prints that one too)."""
    dags = f": {', '.join(result.dag_ids)}" if result.dag_ids else ""
    stale = f"; marked stale: {', '.join(result.stale_dag_ids)}" if result.stale_dag_ids else ""
    command.stdout.write(f"{result.outcome.value} {result.path}{dags}{stale}")
    if result.outcome == FileOutcome.IMPORT_ERROR or (
        unchanged_errors and result.outcome == FileOutcome.IMPORT_ERROR_UNCHANGED
    ):
        command.stderr.write(command.style.ERROR(f"import error in {result.path}:\n{result.error}"))
    for warning in result.warnings:
        command.stderr.write(command.style.WARNING(warning))
    command.stdout.flush()
