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

import logging
import uuid
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from assets_app.exceptions import TaskInstanceNotFoundError
from assets_app.models import (
    TRY_FIELDS,
    DagTask,
    TaskInstance,
    TaskInstanceHistory,
    TaskInstanceState,
    TaskReschedule,
)

logger = logging.getLogger(__name__)

#: Airflow's default ``retry_delay`` (seconds), for a task no manifest declares.
DEFAULT_RETRY_DELAY = 300.0


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
    deferral's ``next_method``/``next_kwargs`` go with the old try. One ``UPDATE``, which
    ``task_instance`` follows in memory; for a retry and for a clear (``clearing``)."""
    values = {"state": state, "next_method": None, "next_kwargs": None, "updated_at": now}
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
    task's ``retry_delay`` (or ``retry_delay_seconds``, the runner's override). Its
    ``try_number`` goes up when ``upkeep`` schedules it. Three statements.
    """
    delay = retry_delay_seconds
    if delay is None:
        declared = (
            DagTask.objects.filter(dag_id=task_instance.dag_id, task_id=task_instance.task_id)
            .values_list("retry_delay", flat=True)
            .first()
        )
        delay = DEFAULT_RETRY_DELAY if declared is None else declared
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
    logger.info(
        "task instance %s (try %s) up for retry as %s at %s: %s",
        old_id,
        task_instance.try_number,
        task_instance.pk,
        task_instance.next_retry_at,
        failure_reason or "failed",
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
