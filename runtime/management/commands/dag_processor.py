"""``manage.py dag_processor DIR``: keep a folder of Airflow DAG files loaded, pass after pass:
every ``--interval`` a pass runs :func:`runtime.dag_processing.dag_folder_load` (the loader
``declare_dags --dags-folder`` runs once) with a watch, so a new or changed file (modification
time or size) is parsed again and a removed file's DAGs go stale; every pass runs the
callbacks runs asked for — a DAG's, or a task's whose try ended outside its process
(:mod:`runtime.dag_callbacks`) — woken by their notification
(PostgreSQL) or at the latest every second. The loop is :class:`runtime.daemon.Daemon`'s.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError

from assets_app.exceptions import AssetsError
from assets_app.management.base import optional_int_argument
from assets_app.notify import CALLBACKS_CHANNEL
from assets_app.services.dags.dag_files import FileOutcome
from assets_app.services.runs.callbacks import CALLBACK_POLL_INTERVAL
from runtime.daemon import Daemon
from runtime.dag_callbacks import dag_callbacks_run
from runtime.dag_processing import DagFileWatch, dag_folder_load
from runtime.management.commands.declare_dags import report_file


class Command(BaseCommand):
    help = (
        "Load the Airflow DAG files of DIR with Airflow's own parser (one subprocess per file) "
        "and keep them loaded: every --interval seconds the files changed since the last pass "
        "are parsed again, new files are loaded and removed files' DAGs marked stale. A file "
        "that fails to import is an import error (admin, /api/v1/import-errors) and its DAGs "
        "keep their last good version. It also runs the DAG-level on_success_callback / "
        "on_failure_callback runs asked for, and a task's on_failure_callback / "
        "on_retry_callback when its try ended outside its process (heartbeat or queued timeout, "
        "its trigger), in the DAG file's code, as soon as asked "
        "(PostgreSQL: LISTEN; else within a second). Runs until stopped (SIGTERM or Ctrl-C), "
        "or one pass with --once."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("folder", help="the DAGs folder")
        parser.add_argument("--once", action="store_true", help="run a single pass and exit")
        parser.add_argument(
            "--interval",
            type=float,
            default=30.0,
            help="seconds between two loads of the folder (default 30, Airflow's "
            "min_file_process_interval); callbacks are run between them",
        )
        optional_int_argument(
            parser,
            "--max-passes",
            help="stop after this many passes of the loop, each running the due callbacks and, "
            "every --interval, loading the folder (default: run until stopped)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        folder = Path(options["folder"]).expanduser()
        interval: float = options["interval"]
        max_passes: int | None = 1 if options["once"] else options["max_passes"]
        if not folder.is_dir():
            raise CommandError(f"{folder}: not a folder")
        if interval < 0:
            raise CommandError("--interval must be >= 0")
        if max_passes is not None and max_passes < 1:
            raise CommandError("--max-passes must be >= 1")
        watch = DagFileWatch()
        self._load_due = 0.0
        daemon = Daemon(
            name="dag processor",
            run_pass=lambda: self._pass(folder, watch=watch, interval=interval),
            # woken by a callback request, at the latest every CALLBACK_POLL_INTERVAL; the
            # folder is loaded every --interval (``_pass``)
            interval=min(interval, CALLBACK_POLL_INTERVAL),
            channel=CALLBACKS_CHANNEL,
            max_passes=max_passes,
            # SIGTERM stops after the pass; Ctrl-C (SIGINT) is a KeyboardInterrupt, at once
            stop_signals=(signal.SIGTERM,),
            # a database error or a parser that cannot start: the next pass tries again (the
            # files not stored stay due)
            recoverable=(DatabaseError, AssetsError),
            report_error=self.stderr.write,
            started=lambda: self._say(
                f"dag processor started on {folder.resolve()} (interval {interval}s)"
            ),
        )
        passes = daemon.run()
        self.stdout.write(self.style.SUCCESS(f"dag processor stopped after {passes} pass(es)"))

    def _pass(self, folder: Path, *, watch: DagFileWatch, interval: float) -> bool:
        if time.monotonic() >= self._load_due:
            self._load_due = time.monotonic() + interval  # a failed load waits as long
            self._load(folder, watch=watch)
        for outcome in dag_callbacks_run():
            state = f"failed: {outcome.error.strip().splitlines()[-1]}" if outcome.error else "ran"
            self.stdout.write(f"callback {outcome.label} {state}")
        self.stdout.flush()
        return True

    def _load(self, folder: Path, *, watch: DagFileWatch) -> None:
        result = dag_folder_load(folder=folder, watch=watch, on_file=lambda r: report_file(self, r))
        if result.files:
            self.stdout.write(
                f"pass: {len(result.files)} file(s), {result.count(FileOutcome.DECLARED)} "
                f"declared, {result.count(FileOutcome.IMPORT_ERROR)} new import error(s)"
            )

    def _say(self, line: str) -> None:
        self.stdout.write(line)
        self.stdout.flush()
