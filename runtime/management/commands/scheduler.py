"""``manage.py scheduler``: create asset-triggered DAG runs from the queue and the due
time-scheduled runs (``assets_app.services.scheduling.time_schedules``), pass after pass,
each pass also doing the task instances' upkeep (reaping timed-out ones, scheduling due retries:
``assets_app.services.scheduling.upkeep``). The loop is :class:`runtime.daemon.Daemon`'s."""

from __future__ import annotations

import signal
import time
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError
from django.utils import timezone

from assets_app.management.base import optional_int_argument
from assets_app.notify import QUEUE_CHANNEL, RUNS_CHANNEL
from assets_app.services.runs.admit import dag_runs_admit
from assets_app.services.runs.advance import AdvanceResult, task_instances_advance
from assets_app.services.scheduling.queue_watch import QueueWatch
from assets_app.services.scheduling.scheduler import Outcome, SchedulerPassResult, scheduler_pass
from assets_app.services.scheduling.time_schedules import (
    TimeSchedulesResult,
    dags_time_scheduled_runs_create,
)
from assets_app.services.scheduling.upkeep import UpkeepResult, upkeep_pass
from runtime.celery_dispatch import CelerySender, DispatchResult, task_instances_dispatch
from runtime.daemon import Daemon

#: How far back a pass between the full ones looks for changed task instances: more than a
#: pass and a commit's delay take.
FLOW_LOOKBACK = timedelta(seconds=10)


class Command(BaseCommand):
    help = (
        "Turn asset_dag_run_queue rows into asset-triggered DAG runs when a consumer's asset "
        "condition is met; create the scheduled runs of time-scheduled DAGs (cron, preset or "
        "timedelta schedule) when they are due, each once, catching up missed ones only for "
        "DAGs with catchup, up to max_active_runs; start queued runs as max_active_runs allows "
        "and schedule each run's task instances as their upstreams finish (trigger rules); "
        "fail (or retry) running task instances whose heartbeat timed out "
        "(TASK_INSTANCE_HEARTBEAT_TIMEOUT) or that no runner started (TASK_QUEUED_TIMEOUT), "
        "and schedule retries whose delay has passed. Runs passes until stopped (SIGTERM or "
        "Ctrl-C), or one pass with --once: on PostgreSQL as soon as producers commit queue "
        "rows (LISTEN), at the latest every --interval seconds (the upkeep at most once per "
        "interval). Several schedulers may run at once. With EXECUTOR=celery it also sends "
        "each runnable task instance to Celery (CELERY_BROKER_URL) on its task's queue."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--once", action="store_true", help="run a single pass and exit")
        parser.add_argument(
            "--interval",
            type=float,
            default=1.0,
            help="the longest wait between passes (default 1); on PostgreSQL a pass starts "
            "as soon as a producer commits queue rows",
        )
        optional_int_argument(
            parser, "--max-passes", help="stop after this many passes (default: run until stopped)"
        )
        optional_int_argument(
            parser, "--max-dags", help="look at no more than this many waiting DAGs per pass"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        interval: float = options["interval"]
        max_passes: int | None = 1 if options["once"] else options["max_passes"]
        if interval < 0:
            raise CommandError("--interval must be >= 0")
        if max_passes is not None and max_passes < 1:
            raise CommandError("--max-passes must be >= 1")
        if options["max_dags"] is not None and options["max_dags"] < 1:
            raise CommandError("--max-dags must be >= 1")

        self._created = 0
        self._sender: CelerySender | None = None
        if settings.EXECUTOR == "celery":
            try:
                self._sender = CelerySender.from_settings(report=self._say)
            except ValueError as exc:
                raise CommandError(str(exc)) from exc
        self._watch = QueueWatch()  # passes after the first look at new queue rows only
        self._upkeep_due = 0.0
        daemon = Daemon(
            name="scheduler",
            run_pass=lambda: self._pass(max_dags=options["max_dags"], interval=interval),
            interval=interval,
            max_passes=max_passes,
            # only sleeps on SQLite; with EXECUTOR=celery it also wakes when task instances
            # became runnable (a task's end scheduled its downstreams), to send them at once
            channel=(QUEUE_CHANNEL, RUNS_CHANNEL) if self._sender is not None else QUEUE_CHANNEL,
            # SIGTERM stops after the pass; Ctrl-C (SIGINT) is a KeyboardInterrupt, at once
            stop_signals=(signal.SIGTERM,),
            recoverable=(DatabaseError,),  # say, the database restarted
            report_error=self.stderr.write,
            started=lambda: self._say(
                f"scheduler started (interval {interval}s, executor {settings.EXECUTOR})"
            ),
        )
        passes = daemon.run()
        self.stdout.write(
            self.style.SUCCESS(f"scheduler stopped after {passes} pass(es), {self._created} run(s)")
        )

    def _pass(self, *, max_dags: int | None, interval: float) -> bool:
        """One pass, with the upkeep first when due (not on every wake-up: at most once per
        interval)."""
        upkeep = time.monotonic() >= self._upkeep_due
        try:
            self._created += self._steps(max_dags=max_dags, upkeep=upkeep)
        finally:
            if upkeep:
                self._upkeep_due = time.monotonic() + interval
        return True

    def _steps(self, *, max_dags: int | None, upkeep: bool) -> int:
        """The pass's steps and their report; the number of runs it created."""
        if upkeep:
            self._report_upkeep(upkeep_pass())
        result = scheduler_pass(max_dags=max_dags, watch=self._watch)
        timed = dags_time_scheduled_runs_create()
        admitted = dag_runs_admit()
        # every run with waiting task instances once per interval (with the upkeep), else
        # only those where something changed lately: the hand-over did the rest
        advanced = task_instances_advance(
            changed_since=None if upkeep else timezone.now() - FLOW_LOOKBACK
        )
        self._report(result)
        self._report_time(timed)
        self._report_flow(admitted, advanced)
        if self._sender is not None:
            self._report_dispatch(task_instances_dispatch(send=self._sender))
        self.stdout.flush()
        return len(result.created) + len(timed.created)

    def _report_dispatch(self, result: DispatchResult) -> None:
        lines = [f"sent {s.label} to Celery queue {s.queue}" for s in result.sent]
        if result.given_back:
            lines.append(f"gave back {result.given_back} task instance(s) the broker did not take")
        lines += [f"failed {line}" for line in result.failed]
        self._write(lines)

    def _say(self, line: str) -> None:
        self.stdout.write(line)
        self.stdout.flush()

    def _report(self, result: SchedulerPassResult) -> None:
        self._write(
            [
                f"created {run.dag_id} {run.run_id} "
                f"({len(run.event_ids)} event(s), {len(run.task_ids)} task instance(s))"
                for run in result.created
            ]
        )
        failed = result.count(Outcome.FAILED)
        if failed:
            self.stderr.write(f"{failed} DAG(s) failed this pass; see the log")

    def _report_time(self, result: TimeSchedulesResult) -> None:
        self._write([f"created {run.dag_id} {run.run_id} (time)" for run in result.created])

    def _report_flow(self, admitted: list[int], advanced: AdvanceResult) -> None:
        lines = [f"started {len(admitted)} queued run(s)"] if admitted else []
        if advanced.scheduled or advanced.skipped or advanced.upstream_failed:
            lines.append(
                f"scheduled {advanced.scheduled}, skipped {advanced.skipped}, upstream_failed "
                f"{advanced.upstream_failed} task instance(s) by their trigger rules"
            )
        self._write(lines)

    def _report_upkeep(self, result: UpkeepResult) -> None:
        lines = [
            f"reaped {reaped.label} try {reaped.try_number} (heartbeat timed out): {reaped.state}"
            for reaped in result.reaped
        ] + [
            f"reaped {stuck.label} try {stuck.try_number} (queued, never started): {stuck.state}"
            for stuck in result.unstarted
        ]
        if result.retries_scheduled or result.reschedules_scheduled:
            lines.append(
                f"scheduled {result.retries_scheduled} retry(ies), "
                f"{result.reschedules_scheduled} reschedule(s)"
            )
        if result.deferrals_timed_out:
            lines.append(
                f"timed out {result.deferrals_timed_out} deferred task instance(s): "
                "scheduled to fail (Trigger timeout)"
            )
        if result.runs_settled:
            lines.append(f"settled {result.runs_settled} run(s) left running with nothing to run")
        if result.runs_timed_out:
            lines.append(f"failed {len(result.runs_timed_out)} run(s) past their dagrun_timeout")
        self._write(lines)

    def _write(self, lines: list[str]) -> None:
        for line in lines:
            self.stdout.write(line)
