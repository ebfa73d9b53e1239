"""Upkeep of task instances, once per scheduler loop (``upkeep_pass``).

- **Reaper** (Airflow's task-instance heartbeat timeout): a ``running`` task instance whose
  last heartbeat (or, before the first, its start) is older than
  ``settings.TASK_INSTANCE_HEARTBEAT_TIMEOUT`` seconds fails, or becomes ``up_for_retry`` (a
  new try) while tries remain, with ``failure_reason`` saying why, and asks for its task's
  ``on_failure_callback`` / ``on_retry_callback`` (``runs.callbacks``); its run settles (after
  the commit, see ``dag_run_settle``). Each is
  reaped in its own transaction with ``FOR UPDATE SKIP LOCKED``, so several schedulers never
  reap one twice and never wait on a task instance a runner is reporting on.
- **Due retries**: an ``up_for_retry`` task instance whose ``next_retry_at`` has passed
  becomes ``scheduled`` with ``try_number + 1`` (and a due ``up_for_reschedule`` one
  ``scheduled`` with the same try), for a worker to claim.
- **Stuck in queued** (Airflow's ``task_queued_timeout``): a ``queued`` task instance that
  no runner started within ``settings.TASK_QUEUED_TIMEOUT`` seconds fails (or is retried
  while tries remain), saying why, like a reaped one.
- **Deferral timeouts** (Airflow's ``check_trigger_timeouts``): a ``deferred`` task instance
  past its ``trigger_timeout`` is scheduled to fail (``runs.triggers``), with or without a
  triggerer running: nothing waits for ever. A ``scheduled`` task instance of a
  ``start_from_trigger`` task is deferred to start in a triggerer.
- **Unsettled runs**: a ``running`` run whose task instances have all finished ends
  (``dag_runs_settle_finished``): a process that died between a task instance's commit and
  its run's settle leaves one behind.
- **Timed-out runs** (Airflow's ``dagrun_timeout``): a ``running`` run older than its DAG's
  timeout fails, its unfinished task instances skipped (``dag_runs_fail_timed_out``).

The scheduler's every pass also admits queued runs and decides waiting task instances
(``runs.admit.dag_runs_admit`` and ``runs.advance.task_instances_advance``), which is not
upkeep: they are how runs move on.
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from assets_app.models import DagTask, TaskInstance, TaskInstanceState
from assets_app.services.runs.advance import dag_run_progress
from assets_app.services.runs.callbacks import task_callback_request
from assets_app.services.runs.emails import FailureMail, failure_mail_on_commit, recipients_of
from assets_app.services.runs.settle import dag_runs_fail_timed_out, dag_runs_settle_finished
from assets_app.services.runs.tries import is_eligible_to_retry, task_instance_next_try
from assets_app.services.runs.triggers import (
    task_instances_deferral_timeout,
    task_instances_start_in_triggerer,
)

logger = logging.getLogger(__name__)

#: The most task instances reaped in one pass (the rest wait for the next).
REAP_LIMIT = 500


@dataclass(frozen=True)
class ReapedTaskInstance:
    label: str  # dag.task @ run
    try_number: int
    state: str  # failed or up_for_retry
    task_instance_id: uuid.UUID  # the id it has now (a new one when up for retry)


@dataclass
class UpkeepResult:
    reaped: list[ReapedTaskInstance] = field(default_factory=list)
    #: queued task instances no runner started in time (``TASK_QUEUED_TIMEOUT``)
    unstarted: list[ReapedTaskInstance] = field(default_factory=list)
    retries_scheduled: int = 0
    reschedules_scheduled: int = 0
    #: deferred task instances past their trigger timeout, scheduled to fail
    deferrals_timed_out: int = 0
    #: scheduled task instances of start_from_trigger tasks, deferred to start in a triggerer
    started_in_triggerer: int = 0
    runs_settled: int = 0  # left running by a process that died before settling them
    #: runs failed because they ran longer than their DAG's ``dagrun_timeout``
    runs_timed_out: list[int] = field(default_factory=list)


def upkeep_pass(*, now: datetime | None = None) -> UpkeepResult:
    """Reap task instances whose heartbeat timed out, then schedule the due retries."""
    now = now or timezone.now()
    result = UpkeepResult(
        reaped=task_instances_reap(now=now), unstarted=task_instances_fail_unstarted(now=now)
    )
    result.retries_scheduled, result.reschedules_scheduled = task_instances_schedule_due(now=now)
    result.deferrals_timed_out = task_instances_deferral_timeout(now=now)
    result.started_in_triggerer = task_instances_start_in_triggerer(now=now)
    result.runs_settled = dag_runs_settle_finished(end_date=now)
    result.runs_timed_out = dag_runs_fail_timed_out(now=now)
    return result


def _timed_out(cutoff: datetime) -> Q:
    return (
        Q(last_heartbeat_at__lt=cutoff)
        | Q(last_heartbeat_at__isnull=True, start_date__lt=cutoff)
        | Q(last_heartbeat_at__isnull=True, start_date__isnull=True, updated_at__lt=cutoff)
    )


def task_instances_reap(*, now: datetime | None = None) -> list[ReapedTaskInstance]:
    """Fail (or retry) the running task instances whose heartbeat timed out."""
    now = now or timezone.now()
    timeout = float(settings.TASK_INSTANCE_HEARTBEAT_TIMEOUT)
    cutoff = now - timedelta(seconds=timeout)
    candidates = list(
        TaskInstance.objects.filter(_timed_out(cutoff), state=TaskInstanceState.RUNNING)
        .order_by("last_heartbeat_at", "start_date")
        .values_list("pk", flat=True)[:REAP_LIMIT]
    )
    reaped = []
    for task_instance_id in candidates:
        one = _reap(
            task_instance_id,
            still=Q(_timed_out(cutoff), state=TaskInstanceState.RUNNING),
            now=now,
            reason=functools.partial(_heartbeat_reason, timeout=timeout),
        )
        if one is not None:
            reaped.append(one)
    return reaped


def _heartbeat_reason(task_instance: TaskInstance, *, timeout: float) -> str:
    last = task_instance.last_heartbeat_at or task_instance.start_date
    return (
        f"heartbeat timeout: no heartbeat for more than {timeout:g} s from "
        f"{task_instance.hostname or '?'} pid {task_instance.pid} "
        f"(last {'heartbeat' if task_instance.last_heartbeat_at else 'start'} "
        f"{last.isoformat() if last else 'never'})"
    )


def task_instances_fail_unstarted(*, now: datetime | None = None) -> list[ReapedTaskInstance]:
    """Fail (or retry) the ``queued`` task instances no runner started within
    ``TASK_QUEUED_TIMEOUT`` seconds of being queued."""
    now = now or timezone.now()
    timeout = float(settings.TASK_QUEUED_TIMEOUT)
    still = Q(state=TaskInstanceState.QUEUED, updated_at__lt=now - timedelta(seconds=timeout))
    reason = (
        f"queued timeout: no runner started it within {timeout:g} s of being queued "
        "(TASK_QUEUED_TIMEOUT; is a worker running?)"
    )
    candidates = list(
        TaskInstance.objects.filter(still)
        .order_by("updated_at")
        .values_list("pk", flat=True)[:REAP_LIMIT]
    )
    failed = []
    for task_instance_id in candidates:
        one = _reap(task_instance_id, still=still, now=now, reason=lambda _ti: reason)
        if one is not None:
            failed.append(one)
    return failed


def task_instance_fail_queued(
    *, task_instance_id: uuid.UUID, reason: str, now: datetime | None = None
) -> ReapedTaskInstance | None:
    """Fail (or retry) a ``queued`` task instance no runner can take, with ``reason`` as its
    ``failure_reason`` (as the queued timeout does); ``None`` when it is no longer queued."""
    return _reap(
        task_instance_id,
        still=Q(state=TaskInstanceState.QUEUED),
        now=now or timezone.now(),
        reason=lambda _ti: reason,
    )


def _reap(
    task_instance_id: uuid.UUID,
    *,
    still: Q,
    now: datetime,
    reason: Callable[[TaskInstance], str],
) -> ReapedTaskInstance | None:
    """Fail (or retry) one task instance that is ``still`` stuck, under its lock; its run moves
    on after the commit."""
    with transaction.atomic():
        # re-checked under the lock: it may have heartbeated, finished or been reaped since
        task_instance = (
            TaskInstance.objects.select_for_update(skip_locked=True)
            .filter(still, pk=task_instance_id)
            .first()
        )
        if task_instance is None:
            return None
        why = reason(task_instance)
        label = f"{task_instance.dag_id}.{task_instance.task_id} @ {task_instance.run_id}"
        try_number = task_instance.try_number
        if is_eligible_to_retry(
            state=task_instance.state,
            try_number=task_instance.try_number,
            max_tries=task_instance.max_tries,
        ):
            task_instance_next_try(task_instance, end_date=now, failure_reason=why)
        else:
            task_instance.state = TaskInstanceState.FAILED
            task_instance.end_date = now
            if task_instance.start_date is not None:
                task_instance.duration = (now - task_instance.start_date).total_seconds()
            task_instance.failure_reason = why
            task_instance.save(
                update_fields=["state", "end_date", "duration", "failure_reason", "updated_at"]
            )
            _failure_mail(task_instance, reason=why)
        task_callback_request(
            task_instance=task_instance,
            try_number=try_number,
            failed=task_instance.state == TaskInstanceState.FAILED,
            reason=why,
        )
    if task_instance.state == TaskInstanceState.FAILED:  # after the commit: its run moves on
        dag_run_progress(dag_run_id=task_instance.dag_run_id, has_downstream=True, end_date=now)
    logger.warning("reaped %s (try %s) → %s: %s", label, try_number, task_instance.state, why)
    return ReapedTaskInstance(
        label=label,
        try_number=try_number,
        state=str(task_instance.state),
        task_instance_id=task_instance.pk,
    )


def _failure_mail(task_instance: TaskInstance, *, reason: str) -> None:
    """Mail a reaped try's failure to its task's ``email`` (``email_on_failure``) after the
    commit, as a reported failure is (one query)."""
    declared = (
        DagTask.objects.filter(
            dag_id=task_instance.dag_id, task_id=task_instance.task_id, email_on_failure=True
        )
        .values_list("email", flat=True)
        .first()
    )
    failure_mail_on_commit(
        FailureMail(
            recipients=recipients_of(declared),
            dag_id=task_instance.dag_id,
            task_id=task_instance.task_id,
            run_id=task_instance.run_id,
            map_index=task_instance.map_index,
            try_number=task_instance.try_number,
            max_tries=task_instance.max_tries,
            state=TaskInstanceState.FAILED.value,
            hostname=task_instance.hostname,
            exception=reason,
        )
    )


def task_instances_schedule_due(*, now: datetime | None = None) -> tuple[int, int]:
    """``up_for_retry`` task instances whose ``next_retry_at`` has passed → ``scheduled`` as
    their next try; due ``up_for_reschedule`` ones → ``scheduled``. Two ``UPDATE`` statements,
    each re-checking the state of a row another scheduler changed first (no try is counted
    twice). Returns (retries, reschedules) scheduled."""
    now = now or timezone.now()
    retries = (
        TaskInstance.objects.filter(state=TaskInstanceState.UP_FOR_RETRY)
        .filter(Q(next_retry_at__isnull=True) | Q(next_retry_at__lte=now))
        .update(
            state=TaskInstanceState.SCHEDULED,
            try_number=F("try_number") + 1,
            next_retry_at=None,
            updated_at=now,
        )
    )
    reschedules = TaskInstance.objects.filter(
        state=TaskInstanceState.UP_FOR_RESCHEDULE, reschedule_date__lte=now
    ).update(state=TaskInstanceState.SCHEDULED, updated_at=now)
    if retries or reschedules:
        logger.info("scheduled %s retry(ies) and %s reschedule(s)", retries, reschedules)
    return retries, reschedules
