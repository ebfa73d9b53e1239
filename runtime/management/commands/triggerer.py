"""``manage.py triggerer``: run the triggers of deferred task instances and resume them when
their triggers fire (``runtime.triggerer``; the loop is :class:`runtime.daemon.Daemon`'s)."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError

from assets_app.management.base import optional_int_argument
from assets_app.notify import TRIGGERS_CHANNEL
from assets_app.services.runs.triggers import triggerer_end, triggerer_register
from runtime.daemon import Daemon
from runtime.triggerer import PassReport, TriggererPass, TriggerLoop, airflow_home


class Command(BaseCommand):
    help = (
        "Run the triggers of deferred task instances (Airflow's own trigger classes, in an "
        "asyncio loop) and resume each task instance when its trigger fires: it goes back to "
        "scheduled with the event for a worker to run its next method. A trigger that raises, "
        "or a deferral past its timeout, schedules the task instance to fail, as in Airflow. "
        "Several triggerers may run at once: each trigger runs in exactly one, and a dead "
        "triggerer's triggers move to a live one after TRIGGERER_HEALTH_CHECK_THRESHOLD "
        "seconds. Runs until SIGTERM / Ctrl-C, or --max-passes passes."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        optional_int_argument(
            parser,
            "--capacity",
            help="the most triggers run at once (default: setting TRIGGERER_CAPACITY, 1000)",
        )
        parser.add_argument(
            "--interval",
            type=float,
            default=1.0,
            help="the longest wait between passes (default 1); on PostgreSQL a pass starts "
            "as soon as a task instance defers, and one starts whenever a trigger fires",
        )
        optional_int_argument(
            parser, "--max-passes", help="stop after this many passes (default: run until stopped)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        capacity: int = (
            options["capacity"]
            if options["capacity"] is not None
            else int(settings.TRIGGERER_CAPACITY)
        )
        interval: float = options["interval"]
        max_passes: int | None = options["max_passes"]
        if capacity < 1:
            raise CommandError("--capacity must be >= 1")
        if interval < 0:
            raise CommandError("--interval must be >= 0")
        if max_passes is not None and max_passes < 1:
            raise CommandError("--max-passes must be >= 1")
        airflow_home()

        fired = threading.Event()
        loop = TriggerLoop(on_fired=fired.set)
        row = triggerer_register(hostname=socket.getfqdn(), pid=os.getpid(), capacity=capacity)
        work = TriggererPass(triggerer_id=row.pk, capacity=capacity, loop=loop)

        full_due = [0.0]

        def one_pass() -> bool:
            """The full pass at most once per interval; woken by a fired trigger before
            that, only submit what fired (its task instance resumes at once)."""
            fired.clear()
            if time.monotonic() < full_due[0]:
                resumed, failed = work.submit()
                self._report(PassReport(0, 0, resumed, failed, 0, 0))
                return True
            full_due[0] = time.monotonic() + interval
            self._report(work.run())
            return True

        def woken() -> bool:
            return fired.is_set()

        def close() -> None:
            loop.stop()
            triggerer_end(triggerer_id=row.pk)

        loop.start()
        daemon = Daemon(
            name="triggerer",
            run_pass=one_pass,
            interval=interval,
            max_passes=max_passes,
            channel=TRIGGERS_CHANNEL,  # only sleeps on SQLite
            stop_signals=(signal.SIGTERM,),
            check_every=0.05,  # a fired trigger is submitted within this
            recoverable=(DatabaseError,),
            report_error=self.stderr.write,
            woken=woken,
            started=lambda: self._say(
                f"triggerer {row.pk} started (capacity {capacity}, interval {interval}s)"
            ),
            close=close,
        )
        passes = daemon.run()
        self.stdout.write(self.style.SUCCESS(f"triggerer {row.pk} stopped after {passes} pass(es)"))

    def _say(self, line: str) -> None:
        self.stdout.write(line)
        self.stdout.flush()

    def _report(self, report: PassReport) -> None:
        lines = [f"resumed {label}" for label in report.resumed]
        lines += [f"trigger failed: {label} scheduled to fail" for label in report.failed]
        if report.started:
            lines.append(f"started {report.started} trigger(s)")
        if report.cancelled:
            lines.append(f"cancelled {report.cancelled} trigger(s) no longer ours")
        if report.timed_out:
            lines.append(f"timed out {report.timed_out} deferred task instance(s)")
        if report.released:
            lines.append(f"released {report.released} trigger(s) of dead triggerer(s)")
        for line in lines:
            self.stdout.write(line)
        if lines:
            self.stdout.flush()
