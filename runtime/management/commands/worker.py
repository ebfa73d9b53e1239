"""``manage.py worker``: run runnable task instances, like Airflow's LocalExecutor
(``runtime.worker``; the loop is :class:`runtime.daemon.Daemon`'s, which handles SIGTERM and
SIGINT)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from runtime.worker import Worker


class Command(BaseCommand):
    help = (
        "Claim runnable (scheduled) task instances and run each in a child process against the "
        "execution API: a task's `callable` under task_sdk, a DAG's `airflow_dag_file` under "
        "Airflow's worker. Runs until SIGTERM / Ctrl-C (running tasks get --grace-period "
        "seconds to finish; a second signal ends them at once), or with --once / --max-tasks "
        "until those are done. Several workers may run at once."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--server",
            default=None,
            help="the execution API server's root URL (default: setting EXECUTION_API_URL, "
            "env EXECUTION_API_URL, else http://127.0.0.1:8000)",
        )
        parser.add_argument(
            "--concurrency", type=int, default=4, help="tasks run at once (default 4)"
        )
        parser.add_argument(
            "--once",
            action="store_true",
            help="claim once (up to --concurrency), run what was claimed, then exit",
        )
        parser.add_argument(
            "--max-tasks",
            type=int,
            default=None,
            help="exit after running this many task instances",
        )
        parser.add_argument(
            "--poll-interval",
            type=float,
            default=1.0,
            help="seconds between looks for work when there is none (default 1)",
        )
        parser.add_argument(
            "--grace-period",
            type=float,
            default=30.0,
            help="seconds running tasks get to finish after SIGTERM / Ctrl-C (default 30)",
        )
        parser.add_argument(
            "--log-dir",
            default=None,
            help="where each try's log goes (default: setting WORKER_LOG_DIR, env "
            "WORKER_LOG_DIR, else var/task_logs)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        server: str = options["server"] or settings.EXECUTION_API_URL
        if not server.startswith(("http://", "https://")):
            raise CommandError(f"--server must be an http(s) URL, got {server!r}")
        if options["concurrency"] < 1:
            raise CommandError("--concurrency must be >= 1")
        if options["max_tasks"] is not None and options["max_tasks"] < 1:
            raise CommandError("--max-tasks must be >= 1")
        if options["poll_interval"] <= 0:
            raise CommandError("--poll-interval must be > 0")
        if options["grace_period"] < 0:
            raise CommandError("--grace-period must be >= 0")
        log_dir = Path(options["log_dir"] or settings.WORKER_LOG_DIR).expanduser().resolve()

        worker = Worker(
            server=server,
            log_dir=log_dir,
            concurrency=options["concurrency"],
            once=options["once"],
            max_tasks=options["max_tasks"],
            poll_interval=options["poll_interval"],
            grace_period=options["grace_period"],
            warm=settings.WORKER_WARM,
            report=self._report,
            started=lambda: self._report(
                f"worker started (concurrency {options['concurrency']}, server {server}, "
                f"logs in {log_dir})"
            ),
        )
        summary = worker.run()
        self.stdout.write(
            self.style.SUCCESS(
                f"worker stopped: {len(summary.outcomes)} task instance(s) run, "
                f"{summary.count('success')} success, {summary.count('failed')} failed, "
                f"{summary.count('up_for_retry')} up for retry; "
                f"{summary.given_back} given back unstarted"
            )
        )

    def _report(self, line: str) -> None:
        self.stdout.write(line)
        self.stdout.flush()
