"""A task instance's tries: each try has its own id (as in Airflow 3).

A try that fails with tries left (:func:`is_eligible_to_retry`) ends ``up_for_retry`` as a new
try (:func:`task_instance_next_try`: the finished try goes to ``TaskInstanceHistory``, the task
instance gets a new id, so a late report from the old try's runner finds nothing); ``upkeep``
makes it ``scheduled`` once its retry delay has passed. A clear (``clearing``) starts a new
try the same way (:func:`task_instance_history_record`, :func:`task_instance_renew`). A sensor
in reschedule mode keeps its try and waits (:func:`task_instance_reschedule`).

Since an id names one try, a task instance is locked by its current try's id
(:func:`task_instance_lock`), and an earlier try's id is told apart from an unknown one in
the error (:func:`task_instance_not_found`).
"""

from __future__ import annotations

import hashlib
import logging
import math
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Subquery
from django.utils import timezone

from assets_app.exceptions import TaskInstanceNotFoundError
from assets_app.models import (
    TRY_FIELDS,
    DagRun,
    DagTask,
    TaskInstance,
    TaskInstanceHistory,
    TaskInstanceState,
    TaskReschedule,
)
from assets_app.services.runs.emails import FailureMail, failure_mail_on_commit, recipients_of

logger = logging.getLogger(__name__)

#: Airflow's default ``retry_delay`` (seconds), for a task no manifest declares.
DEFAULT_RETRY_DELAY = 300.0
#: Airflow's ``[core] max_task_retry_delay``: no backoff waits longer (seconds).
MAX_RETRY_DELAY = 24 * 60 * 60


@dataclass(frozen=True)
class RetryPolicy:
    """A task's retry spacing as declared: Airflow's ``retry_delay`` (seconds),
    ``retry_exponential_backoff`` (a multiplier; 0 or 1: constant) and ``max_retry_delay``."""

    retry_delay: float = DEFAULT_RETRY_DELAY
    retry_exponential_backoff: float = 0.0
    max_retry_delay: float | None = None


def retry_delay_seconds(
    policy: RetryPolicy,
    *,
    dag_id: str,
    task_id: str,
    logical_date: datetime | None,
    try_number: int,
) -> float:
    """How long after a failed try (``try_number``) its next try waits: Airflow 3.3's
    ``TaskInstance.next_retry_datetime``, to the second.

    Without backoff, ``retry_delay``. With a multiplier ``m``, ``b = ceil(retry_delay *
    m ** (try_number - 1))`` (at least 1), plus a jitter below ``b`` from a SHA-1 of the task
    instance's key (``dag_id#task_id#logical_date#try_number``, so the same try always waits the
    same), capped by 24 h and by ``max_retry_delay``."""
    delay = float(policy.retry_delay)
    multiplier = policy.retry_exponential_backoff or 1.0
    if multiplier == 1.0 or multiplier <= 0:
        return max(delay, 0.0)
    try:
        min_backoff = math.ceil(delay * (multiplier ** (try_number - 1)))
    except OverflowError:
        min_backoff = MAX_RETRY_DELAY
    min_backoff = max(min_backoff, 1)
    ti_hash = int(
        hashlib.sha1(
            f"{dag_id}#{task_id}#{logical_date}#{try_number}".encode(), usedforsecurity=False
        ).hexdigest(),
        16,
    )
    seconds = float(min(min_backoff + ti_hash % min_backoff, MAX_RETRY_DELAY))
    if policy.max_retry_delay:
        seconds = min(seconds, float(policy.max_retry_delay))
    return seconds


def is_eligible_to_retry(*, state: str | None, try_number: int, max_tries: int) -> bool:
    """Whether a failure of this try becomes ``up_for_retry`` (Airflow 3's rule)."""
    if state == TaskInstanceState.RESTARTING:
        return True  # cleared while running: always eligible for a retry
    return max_tries != 0 and try_number <= max_tries


def task_instance_lock(
    task_instance_id: uuid.UUID | str, *, load_run: bool = False
) -> TaskInstance:
    """Lock and return the task instance; call inside ``transaction.atomic``.

    ``load_run``: load its run too (not locked). One statement by primary key, never an
    ``ORDER BY``; without the run, not even a join. ``TaskInstanceNotFoundError`` for an
    unknown id (:func:`task_instance_not_found`).
    """
    queryset = TaskInstance.objects.select_for_update(of=("self",))
    if load_run:
        queryset = queryset.select_related("dag_run")
    try:
        return queryset.get(pk=task_instance_id)
    except TaskInstance.DoesNotExist:
        raise task_instance_not_found(task_instance_id) from None


def task_instance_not_found(task_instance_id: uuid.UUID | str) -> TaskInstanceNotFoundError:
    """The error for an id no task instance has; it says so when the id is an earlier try's
    (only on this error path: one query)."""
    message = None
    earlier = TaskInstanceHistory.objects.filter(task_instance_id=task_instance_id).first()
    if earlier is not None:
        message = (
            f"Task Instance not found: {task_instance_id} was try {earlier.try_number} of "
            f"{earlier.dag_id}.{earlier.task_id} @ {earlier.run_id}, which has since moved on "
            "to a new try"
        )
    return TaskInstanceNotFoundError(message, task_instance_id=str(task_instance_id))


def _duration(task_instance: TaskInstance, end_date: datetime) -> float | None:
    if task_instance.start_date is None:
        return None
    return (end_date - task_instance.start_date).total_seconds()


def task_instance_history_record(task_instance: TaskInstance, **ended: Any) -> TaskInstanceHistory:
    """The try as it is now, with the ``TRY_FIELDS`` in ``ended`` (``state="failed"``, say)
    instead, as a ``TaskInstanceHistory`` row, unsaved."""
    kept = {name: getattr(task_instance, name) for name in TRY_FIELDS}
    return TaskInstanceHistory(
        task_instance_id=task_instance.pk, updated_at=timezone.now(), **(kept | ended)
    )


def task_instance_renew(
    task_instance: TaskInstance,
    *,
    new_id: uuid.UUID,
    state: str | None,
    now: datetime,
    **changes: Any,
) -> None:
    """Move a locked task instance to a new try's id, in ``state`` with ``changes``: its old
    id then finds nothing, so a late report from the old try's runner gets a 404. A
    deferral's ``next_method``/``next_kwargs`` and trigger go with the old try. One
    ``UPDATE``, which ``task_instance`` follows in memory; for a retry and for a clear
    (``clearing``)."""
    values = {
        "state": state,
        "next_method": None,
        "next_kwargs": None,
        "trigger": None,
        "updated_at": now,
    }
    values |= changes
    TaskInstance.objects.filter(pk=task_instance.pk).update(id=new_id, **values)
    for name, value in values.items():
        setattr(task_instance, name, value)
    task_instance.pk = new_id


def task_instance_next_try(
    task_instance: TaskInstance,
    *,
    end_date: datetime,
    failure_reason: str = "",
    retry_delay_seconds: float | None = None,
) -> None:
    """The running try failed with tries left: it becomes ``up_for_retry`` as a new try.

    Call with the task instance locked. The finished try is kept in ``TaskInstanceHistory``
    as ``failed``; the task instance gets a new id (Airflow's ``prepare_db_for_next_try``) so
    the old try's runner can no longer touch it, and ``next_retry_at`` = ``end_date`` + the
    task's retry delay (:func:`retry_delay_seconds`: its ``retry_delay``, with Airflow's
    exponential backoff if declared), or ``retry_delay_seconds`` (the runner's override). Its
    ``try_number`` goes up when ``upkeep`` schedules it. Three statements.
    """
    declared = _declared(task_instance)
    delay = retry_delay_seconds
    if delay is None:
        delay = _retry_delay_seconds(
            declared.policy,
            dag_id=task_instance.dag_id,
            task_id=task_instance.task_id,
            logical_date=declared.logical_date,
            try_number=task_instance.try_number,
        )
    failed_try = task_instance.try_number
    ended = {
        "end_date": end_date,
        "duration": _duration(task_instance, end_date),
        "failure_reason": failure_reason,
    }
    task_instance_history_record(task_instance, state=TaskInstanceState.FAILED, **ended).save()
    old_id = task_instance.pk
    task_instance_renew(
        task_instance,
        new_id=uuid.uuid4(),
        state=TaskInstanceState.UP_FOR_RETRY,
        now=timezone.now(),
        next_retry_at=end_date + timedelta(seconds=max(delay, 0.0)),
        rendered_map_index=task_instance.rendered_map_index,
        **ended,
    )
    failure_mail_on_commit(
        FailureMail(
            recipients=declared.retry_recipients,
            dag_id=task_instance.dag_id,
            task_id=task_instance.task_id,
            run_id=task_instance.run_id,
            map_index=task_instance.map_index,
            try_number=failed_try,
            max_tries=task_instance.max_tries,
            state=TaskInstanceState.UP_FOR_RETRY.value,
            hostname=task_instance.hostname,
            exception=failure_reason,
        )
    )
    logger.info(
        "task instance %s (try %s) up for retry as %s at %s: %s",
        old_id,
        task_instance.try_number,
        task_instance.pk,
        task_instance.next_retry_at,
        failure_reason or "failed",
    )


@dataclass(frozen=True)
class _Declared:
    """What a failed try's next try reads of its task (and its run's logical date)."""

    policy: RetryPolicy
    logical_date: datetime | None
    retry_recipients: tuple[str, ...]  # ``email`` when ``email_on_retry``


def _declared(task_instance: TaskInstance) -> _Declared:
    """One query: the task's retry policy and mail, and its run's logical date (which the
    backoff's jitter reads)."""
    logical_date = DagRun.objects.filter(pk=task_instance.dag_run_id).values("logical_date")
    row = (
        DagTask.objects.filter(dag_id=task_instance.dag_id, task_id=task_instance.task_id)
        .annotate(run_logical_date=Subquery(logical_date[:1]))
        .values_list(
            "retry_delay",
            "retry_exponential_backoff",
            "max_retry_delay",
            "run_logical_date",
            "email",
            "email_on_retry",
        )
        .first()
    )
    if row is None:
        return _Declared(RetryPolicy(), None, ())
    retry_delay, backoff, max_delay, run_logical_date, email, on_retry = row
    return _Declared(
        RetryPolicy(retry_delay, backoff, max_delay),
        run_logical_date,
        recipients_of(email) if on_retry else (),
    )


def task_instance_reschedule(
    task_instance: TaskInstance, *, reschedule_date: datetime, end_date: datetime
) -> None:
    """Record the poke of a running sensor in reschedule mode (Airflow's ``task_reschedule``
    row: what the sensor's next poke reads as its first start date) and wait, same try, for
    ``reschedule_date``, when ``upkeep`` schedules the task instance again. Call with the task
    instance locked. Two statements."""
    start_date = task_instance.start_date or end_date
    TaskReschedule.objects.create(
        ti_id=task_instance.pk,
        dag_run_id=task_instance.dag_run_id,
        try_number=task_instance.try_number,
        start_date=start_date,
        end_date=end_date,
        duration=(end_date - start_date).total_seconds(),
        reschedule_date=reschedule_date,
    )
    task_instance.state = TaskInstanceState.UP_FOR_RESCHEDULE
    task_instance.reschedule_date = reschedule_date
    task_instance.end_date = end_date
    task_instance.duration = _duration(task_instance, end_date)
    task_instance.task_reschedule_count += 1  # safe: the row is locked
    task_instance.save(
        update_fields=[
            "state",
            "reschedule_date",
            "end_date",
            "duration",
            "task_reschedule_count",
            "updated_at",
        ]
    )


#: :func:`retry_delay_seconds` under a name the next try's parameter does not shadow.
_retry_delay_seconds = retry_delay_seconds
