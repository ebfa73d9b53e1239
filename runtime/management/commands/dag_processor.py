"""``manage.py dag_processor DIR``: keep a folder of Airflow DAG files loaded, pass after pass
(``assets_app.services.dags.dag_files``): a new or changed file (modification time or size) is
parsed again, a removed file's DAGs go stale."""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError

from assets_app.exceptions import AssetsError
from assets_app.management.base import optional_int_argument
from assets_app.management.commands.declare_dags import report_file
from assets_app.services.dags.dag_files import DagFileWatch, FileOutcome, dag_folder_load
from runtime.daemon import connection_close, connection_refresh, stop_signals, wait_for_work

#: How often (seconds) a waiting processor checks whether it was asked to stop.
STOP_CHECK = 0.25


class Command(BaseCommand):
    help = (
        "Load the Airflow DAG files of DIR with Airflow's own parser (one subprocess per file) "
        "and keep them loaded: every --interval seconds the files changed since the last pass "
        "are parsed again, new files are loaded and removed files' DAGs marked stale. A file "
        "that fails to import is an import error (admin, /api/v1/import-errors) and its DAGs "
        "keep their last good version. Runs until stopped (SIGTERM or Ctrl-C), or one pass "
        "with --once."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("folder", help="the DAGs folder")
        parser.add_argument("--once", action="store_true", help="run a single pass and exit")
        parser.add_argument(
            "--interval",
            type=float,
            default=30.0,
            help="seconds between passes (default 30, Airflow's min_file_process_interval)",
        )
        optional_int_argument(
            parser, "--max-passes", help="stop after this many passes (default: run until stopped)"
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
        stop = threading.Event()
        watch = DagFileWatch()
        passes = 0
        self.stdout.write(f"dag processor started on {folder.resolve()} (interval {interval}s)")
        self.stdout.flush()
        with stop_signals(stop.set, signals=(signal.SIGTERM,)):
            try:
                while not stop.is_set():
                    self._pass(folder, watch=watch)
                    passes += 1
                    if max_passes is not None and passes >= max_passes:
                        break
                    wait_for_work(interval, interrupted=stop.is_set, check_every=STOP_CHECK)
            except KeyboardInterrupt:
                pass
            finally:
                connection_close()
        self.stdout.write(self.style.SUCCESS(f"dag processor stopped after {passes} pass(es)"))

    def _pass(self, folder: Path, *, watch: DagFileWatch) -> None:
        """One pass. A database error or a parser that cannot start is reported and the next
        pass tries again (the files not stored stay due)."""
        connection_refresh()
        try:
            result = dag_folder_load(
                folder=folder, watch=watch, on_file=lambda r: report_file(self, r)
            )
        except (DatabaseError, AssetsError) as exc:
            self.stderr.write(f"dag processor pass failed: {exc}")
            connection_close()
            return
        if result.files:
            self.stdout.write(
                f"pass: {len(result.files)} file(s), {result.count(FileOutcome.DECLARED)} "
                f"declared, {result.count(FileOutcome.IMPORT_ERROR)} new import error(s)"
            )
        self.stdout.flush()
