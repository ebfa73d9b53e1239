"""``manage.py declare_dags FILE``: load a DAG manifest (``assets_app.services.manifest``)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from assets_app.management.base import domain_errors, progress_bar
from assets_app.services.dags import DECLARE_STEPS, dags_declare_from_file


class Command(BaseCommand):
    help = (
        "Load a YAML or JSON manifest of DAGs (tasks with inlets/outlets, asset schedules) and "
        "store them with their asset references, like Airflow's DAG processor. Idempotent; DAGs "
        "loaded earlier from the same file but missing now are marked stale. Shows its steps "
        "on a progress bar when stderr is a terminal; prints a one-line summary on stdout, "
        "warnings and log lines on stderr."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="path of the manifest (.yaml/.yml, or .json)")

    def handle(self, *args: Any, **options: Any) -> None:
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
