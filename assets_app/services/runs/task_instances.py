"""Task-instance state transitions driven by the execution API (docs/api-execution.md).

Each public function is one transaction that first locks the task-instance row
(``SELECT … FOR UPDATE`` on PostgreSQL; on SQLite the ``BEGIN IMMEDIATE`` transaction
serializes writers), then re-checks the state and writes; finishing (success, failed …), on
every task's path, does all three in one ``UPDATE … RETURNING`` (``_finish``).

A finished task instance settles its run right after its transaction commits
(``dag_run_settle``); the first one to start moves its run to ``running``. A try that fails
with tries left ends ``up_for_retry`` as a new try (``task_instance_next_try``: the finished
try goes to ``TaskInstanceHistory``, the task instance gets a new id); ``upkeep`` makes it
``scheduled`` once its retry delay has passed.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import Enum, StrEnum
from typing import Any

from django.db import connection, transaction
from django.db.models import Count, Q
from django.utils import timezone

from assets_app.exceptions import (
    TaskInstanceInvalidStateError,
    TaskInstanceNotFoundError,
    TaskInstanceNotRunningError,
    TaskInstanceRunningElsewhereError,
)
from assets_app.models import (
    TRY_FIELDS,
    Dag,
    DagTask,
    TaskInstance,
    TaskInstanceHistory,
    TaskInstanceState,
    TaskReschedule,
)
from assets_app.outlets import AliasOutletEvent, AssetOutletEvent, OutletProfile
from assets_app.services.runs.task_flow import (
    dag_run_ended,
    dag_run_progress,
    dag_run_settle_step,
    dag_run_start,
)
from assets_app.services.sql import (
    Dialect,
    Statement,
    Steps,
    column,
    columns,
    model_from_row,
    statements_cursor,
    table,
)

logger = logging.getLogger(__name__)

STARTABLE_STATES = frozenset({TaskInstanceState.QUEUED, TaskInstanceState.RESTARTING})
#: The longest ``failure_reason`` kept (a runner's ``retry_reason``, the worker's reason).
FAILURE_REASON_MAX_LENGTH = 500
#: Airflow's default ``retry_delay`` (seconds), for a task no manifest declares.
DEFAULT_RETRY_DELAY = 300.0


def is_eligible_to_retry(*, state: str | None, try_number: int, max_tries: int) -> bool:
    """Whether a failure of this try becomes ``up_for_retry`` (Airflow 3's rule)."""
    if state == TaskInstanceState.RESTARTING:
        return True  # cleared while running: always eligible for a retry
    return max_tries != 0 and try_number <= max_tries


# --- typed payloads ---------------------------------------------------------------------


class _Keep(Enum):
    KEEP = "keep"


#: The value of an optional payload field the request did not send: the stored value stays
#: (Airflow writes only the fields a state payload sets). An explicit ``null`` clears it.
KEEP = _Keep.KEEP


@dataclass(frozen=True)
class SuccessPayload:
    end_date: datetime
    task_outlets: Sequence[OutletProfile] = ()
    outlet_events: Sequence[AssetOutletEvent | AliasOutletEvent] = ()
    rendered_map_index: str | _Keep | None = KEEP
    state: TaskInstanceState = TaskInstanceState.SUCCESS


@dataclass(frozen=True)
class TerminalPayload:
    """failed, skipped, removed or upstream_failed."""

    state: TaskInstanceState
    end_date: datetime
    rendered_map_index: str | _Keep | None = KEEP


@dataclass(frozen=True)
class RetryPayload:
    end_date: datetime
    rendered_map_index: str | _Keep | None = KEEP
    retry_delay_seconds: float | None = None
    retry_reason: str | None = None
    state: TaskInstanceState = TaskInstanceState.UP_FOR_RETRY


@dataclass(frozen=True)
class ReschedulePayload:
    reschedule_date: datetime
    end_date: datetime
    state: TaskInstanceState = TaskInstanceState.UP_FOR_RESCHEDULE


@dataclass(frozen=True)
class DeferredPayload:
    classpath: str
    next_method: str
    trigger_kwargs: dict[str, Any] | str | None = None
    trigger_timeout: timedelta | None = None
    next_kwargs: dict[str, Any] | None = None
    rendered_map_index: str | _Keep | None = KEEP
    queue: str | None = None
    state: TaskInstanceState = TaskInstanceState.DEFERRED


StatePayload = SuccessPayload | TerminalPayload | RetryPayload | ReschedulePayload | DeferredPayload


class StateUpdateOutcome(StrEnum):
    UPDATED = "updated"
    UNCHANGED = "unchanged"  # the stored state already was the requested one; nothing written


@dataclass(frozen=True)
class RunStart:
    hostname: str
    unixname: str
    pid: int
    start_date: datetime


@dataclass
class RunStartResult:
    task_instance: TaskInstance
    previous_state: str | None  # the state the TI was in when /run arrived

    @property
    def should_retry(self) -> bool:
        """Whether a failure of this try becomes ``up_for_retry`` (Airflow's rule)."""
        ti = self.task_instance
        return is_eligible_to_retry(
            state=self.previous_state, try_number=ti.try_number, max_tries=ti.max_tries
        )


# --- helpers ------------------------------------------------------------------------------


def _lock(task_instance_id: uuid.UUID | str, *, load_run: bool = False) -> TaskInstance:
    """Lock and return the task instance; call inside ``transaction.atomic``.

    ``load_run``: load its run too (not locked). One statement by primary key, never an
    ``ORDER BY``; without the run, not even a join.
    """
    queryset = TaskInstance.objects.select_for_update(of=("self",))
    if load_run:
        queryset = queryset.select_related("dag_run")
    try:
        return queryset.get(pk=task_instance_id)
    except TaskInstance.DoesNotExist:
        raise TaskInstanceNotFoundError(
            _not_found_message(task_instance_id), task_instance_id=str(task_instance_id)
        ) from None


def _not_found_message(task_instance_id: uuid.UUID | str) -> str | None:
    """Say so when the id is an earlier try's (only on this error path: one query)."""
    earlier = TaskInstanceHistory.objects.filter(task_instance_id=task_instance_id).first()
    if earlier is None:
        return None
    return (
        f"Task Instance not found: {task_instance_id} was try {earlier.try_number} of "
        f"{earlier.dag_id}.{earlier.task_id} @ {earlier.run_id}, which has since moved on to "
        "a new try"
    )


def _duration(task_instance: TaskInstance, end_date: datetime) -> float | None:
    if task_instance.start_date is None:
        return None
    return (end_date - task_instance.start_date).total_seconds()


def _apply_rendered_map_index(
    task_instance: TaskInstance,
    payload: SuccessPayload | TerminalPayload | RetryPayload | DeferredPayload,
) -> list[str]:
    """Store the payload's rendered_map_index unless the request left it out."""
    if payload.rendered_map_index is KEEP:
        return []
    task_instance.rendered_map_index = payload.rendered_map_index
    return ["rendered_map_index"]


# --- services -----------------------------------------------------------------------------


def task_instance_state_update(
    *, task_instance_id: uuid.UUID | str, payload: StatePayload
) -> StateUpdateOutcome:
    """Apply a state patch (docs/api-execution.md) to a ``running`` task instance.

    The same state as stored → ``UNCHANGED`` and nothing is written (a retried success never
    duplicates events); otherwise the TI must be ``running``. A success also registers the
    asset changes, in the same transaction; a finished task instance then settles its run.
    """
    if isinstance(payload, SuccessPayload | TerminalPayload):
        return _finish(task_instance_id, payload)
    if isinstance(payload, DeferredPayload):
        return _defer_refused(task_instance_id, payload)
    with transaction.atomic():
        task_instance = _lock(task_instance_id)
        if task_instance.state == payload.state:
            return _unchanged(task_instance_id, payload.state)
        if task_instance.state != TaskInstanceState.RUNNING:
            raise TaskInstanceInvalidStateError(previous_state=task_instance.state)
        if isinstance(payload, RetryPayload):
            _apply_retry(task_instance, payload)
        else:
            fields = _APPLY[type(payload)](task_instance, payload)
            task_instance.save(update_fields=[*fields, "updated_at"])
    logger.debug("task instance %s moved to %s", task_instance_id, payload.state)
    return StateUpdateOutcome.UPDATED


#: Why a task instance that asked to defer failed.
NO_TRIGGERER_REASON = (
    "deferred to trigger {classpath}, but this registry runs no triggerer: the task failed "
    "instead of waiting for ever (use a sensor in reschedule mode, or a non-deferrable operator)"
)


def _defer_refused(
    task_instance_id: uuid.UUID | str, payload: DeferredPayload
) -> StateUpdateOutcome:
    """A running task instance asked to defer: with no triggerer to resume it, it fails at
    once (its run moves on as for any failure) and says why, instead of staying ``deferred``
    for ever. One stored ``deferred`` already (from an older version) → ``UNCHANGED``; any
    other state → ``TaskInstanceInvalidStateError``, as for every state patch."""
    current = TaskInstance.objects.filter(pk=task_instance_id).values_list("state").first()
    if current is None:
        raise TaskInstanceNotFoundError(
            _not_found_message(task_instance_id), task_instance_id=str(task_instance_id)
        )
    if current[0] == TaskInstanceState.DEFERRED:
        return _unchanged(task_instance_id, TaskInstanceState.DEFERRED)
    if current[0] != TaskInstanceState.RUNNING:
        raise TaskInstanceInvalidStateError(previous_state=current[0])
    outcome = _finish(
        task_instance_id,
        TerminalPayload(
            state=TaskInstanceState.FAILED,
            end_date=timezone.now(),
            rendered_map_index=payload.rendered_map_index,
        ),
    )
    reason = NO_TRIGGERER_REASON.format(classpath=payload.classpath)
    task_instance_failure_reason_record(task_instance_id=task_instance_id, reason=reason)
    logger.warning("task instance %s: %s", task_instance_id, reason)
    return outcome


def _unchanged(task_instance_id: uuid.UUID | str, state: str) -> StateUpdateOutcome:
    logger.debug("task instance %s already in state %s; nothing written", task_instance_id, state)
    return StateUpdateOutcome.UNCHANGED


def _finish(
    task_instance_id: uuid.UUID | str, payload: SuccessPayload | TerminalPayload
) -> StateUpdateOutcome:
    """success, failed, skipped …: the hot path of every task, in the fewest statements.

    One ``UPDATE … WHERE state = 'running' RETURNING`` checks the state, locks the row and
    writes it (no ``SELECT … FOR UPDATE`` first; ``end_date``/``duration`` computed in SQL).
    Only a success that declares outlets needs a transaction around it, for the registration
    statements; otherwise that one statement commits by itself. When it matches no row, one
    more query tells an unknown id (404), a retried report (``UNCHANGED``) and a task instance
    in another state (409) apart.

    The ``UPDATE`` also returns whether the task has downstreams. On PostgreSQL the same
    statement ends the run when this was its last unfinished task instance and a leaf
    (``task_flow.dag_run_settle_step``: a one-task run's success is one statement). Otherwise,
    after the commit, the run moves on (``task_flow.dag_run_progress``: its ready downstreams
    ``scheduled`` and the workers woken — the hand-over —, and the run settled when nothing
    is left; see ``task_flow`` for why after the commit makes two upstreams finishing at once
    hand over exactly once). A retried report does it again, so a process that died between
    the two leaves nothing waiting; the scheduler's passes sweep any other.
    """
    registers = isinstance(payload, SuccessPayload) and bool(payload.task_outlets)
    with transaction.atomic() if registers else contextlib.nullcontext():
        finished, has_downstream, settled = _finish_update(task_instance_id, payload)
        if finished is None:
            dag_run_id = _finish_refused(task_instance_id, payload.state)
            has_downstream = True  # a retried report: hand over again (it may have died before)
        else:
            dag_run_id = finished.dag_run_id
            if registers:
                assert isinstance(payload, SuccessPayload)  # noqa: S101 - narrows the type for mypy
                _register_asset_changes(finished, payload)
    if settled:
        dag_run_ended(dag_run_id)
    else:
        dag_run_progress(dag_run_id=dag_run_id, has_downstream=has_downstream)
    if finished is None:
        return _unchanged(task_instance_id, payload.state)
    logger.debug("task instance %s moved to %s", task_instance_id, payload.state)
    return StateUpdateOutcome.UPDATED


#: what the finishing ``UPDATE`` returns: what registration and the run's settling read
_FINISH_RETURNING = (
    "id",
    "state",
    "dag_id",
    "task_id",
    "run_id",
    "map_index",
    "dag_run",
    "try_number",
    "has_downstream",
)


def _finish_update(
    task_instance_id: uuid.UUID | str, payload: SuccessPayload | TerminalPayload
) -> tuple[TaskInstance | None, bool, bool]:
    """The finishing ``UPDATE``: the task instance as it is now (``None`` if it was not
    running), whether its task has downstreams and whether the statement ended the run."""
    sql = Dialect.current()
    sets_rendered_map_index = payload.rendered_map_index is not KEEP
    end_date = sql.datetime(payload.end_date)
    params: list[Any] = [payload.state.value, end_date, end_date]
    if sets_rendered_map_index:
        params.append(payload.rendered_map_index)
    now = timezone.now()
    params += [
        sql.datetime(now),
        TaskInstance._meta.pk.get_db_prep_value(task_instance_id, connection),
        TaskInstanceState.RUNNING.value,
    ]
    statement = _finish_sql(
        sql,
        clears_next=isinstance(payload, SuccessPayload),
        sets_rendered_map_index=sets_rendered_map_index,
    )
    if sql.postgresql:
        joined = Steps(
            steps=(
                (_FINISHED_STEP, Statement(statement, params)),
                ("settled", dag_run_settle_step(finished=_FINISHED_STEP, end_date=now)),
            ),
            last=Statement(
                f"SELECT {_FINISHED_STEP}.*, EXISTS (SELECT 1 FROM settled) FROM {_FINISHED_STEP}",  # noqa: S608 - fixed names
                [],
            ),
        ).statement()
        statement, params = joined.text, list(joined.params)
    with statements_cursor() as cursor:
        cursor.execute(statement, params)
        row = cursor.fetchone()
    if row is None:
        return None, False, False
    settled = bool(row[len(_FINISH_RETURNING)]) if sql.postgresql else False
    finished = model_from_row(TaskInstance, _FINISH_RETURNING, row[: len(_FINISH_RETURNING)])
    return finished, finished.has_downstream, settled


_FINISHED_STEP = "finished"


@functools.cache
def _finish_sql(sql: Dialect, *, clears_next: bool, sets_rendered_map_index: bool) -> str:
    """``UPDATE`` one running task instance to a finished state ``RETURNING`` what
    registration reads, and whether the task has downstreams (``has_downstream``, a column:
    a subquery on ``dag_task`` here cost PostgreSQL 0.3-0.5 ms per success). Parameters:
    state, end_date twice, [rendered_map_index], updated_at, id, the ``running`` state. A
    success also clears a deferral's
    ``next_method``/``_kwargs`` (as ``_apply_success`` did)."""
    col = functools.partial(column, TaskInstance)
    sets = [
        f"{col('state')} = %s",
        f"{col('end_date')} = %s",
        f"{col('duration')} = {sql.seconds_between('%s', col('start_date'))}",
    ]
    if clears_next:
        sets += [f"{col('next_method')} = NULL", f"{col('next_kwargs')} = NULL"]
    if sets_rendered_map_index:
        sets.append(f"{col('rendered_map_index')} = %s")
    sets.append(f"{col('updated_at')} = %s")
    return (
        f"UPDATE {table(TaskInstance)} SET {', '.join(sets)} "  # noqa: S608 - names from the models, values bound as parameters
        f"WHERE {col('id')} = %s AND {col('state')} = %s "
        f"RETURNING {columns(TaskInstance, *_FINISH_RETURNING)}"
    )


def _finish_refused(task_instance_id: uuid.UUID | str, state: str) -> int:
    """Why the finishing ``UPDATE`` matched no row: raise, or return the run of a task
    instance already in ``state`` (a retried report)."""
    found = (
        TaskInstance.objects.filter(pk=task_instance_id).values_list("state", "dag_run_id").first()
    )
    if found is None:
        raise TaskInstanceNotFoundError(
            _not_found_message(task_instance_id), task_instance_id=str(task_instance_id)
        )
    current, dag_run_id = found
    if current != state:
        raise TaskInstanceInvalidStateError(previous_state=current)
    return dag_run_id


def _register_asset_changes(task_instance: TaskInstance, payload: SuccessPayload) -> None:
    # Imported here: the registration service is a separate module with its own owner.
    from assets_app.services.assets.registration import asset_changes_register

    asset_changes_register(
        task_instance=task_instance,
        task_outlets=payload.task_outlets,
        outlet_events=payload.outlet_events,
    )


def _apply_retry(task_instance: TaskInstance, payload: RetryPayload) -> None:
    if payload.rendered_map_index is not KEEP:
        task_instance.rendered_map_index = payload.rendered_map_index
    task_instance_next_try(
        task_instance,
        end_date=payload.end_date,
        failure_reason=(payload.retry_reason or "")[:FAILURE_REASON_MAX_LENGTH],
        retry_delay_seconds=payload.retry_delay_seconds,
    )


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


def _apply_reschedule(task_instance: TaskInstance, payload: ReschedulePayload) -> list[str]:
    """Record the poke (Airflow's ``task_reschedule`` row: what the sensor's next poke reads
    as its first start date) and wait for ``reschedule_date``, when ``upkeep`` schedules the
    task instance again."""
    start_date = task_instance.start_date or payload.end_date
    TaskReschedule.objects.create(
        ti_id=task_instance.pk,
        dag_run_id=task_instance.dag_run_id,
        try_number=task_instance.try_number,
        start_date=start_date,
        end_date=payload.end_date,
        duration=(payload.end_date - start_date).total_seconds(),
        reschedule_date=payload.reschedule_date,
    )
    task_instance.state = TaskInstanceState.UP_FOR_RESCHEDULE
    task_instance.reschedule_date = payload.reschedule_date
    task_instance.end_date = payload.end_date
    task_instance.duration = _duration(task_instance, payload.end_date)
    task_instance.task_reschedule_count += 1  # safe: the row is locked
    return ["state", "reschedule_date", "end_date", "duration", "task_reschedule_count"]


_APPLY: dict[type, Any] = {
    ReschedulePayload: _apply_reschedule,
}


def task_instance_run_start(*, task_instance_id: uuid.UUID | str, run: RunStart) -> RunStartResult:
    """Move a ``queued``/``restarting`` TI to ``running`` (``/run``, docs/api-execution.md).

    A repeat from the same hostname, unixname and pid while running succeeds again without
    writing; anything else raises ``TaskInstanceInvalidStateError``.
    """
    with transaction.atomic():
        task_instance = _lock(task_instance_id, load_run=True)
        if task_instance.state == TaskInstanceState.RUNNING and (
            task_instance.hostname,
            task_instance.unixname,
            task_instance.pid,
        ) == (run.hostname, run.unixname, run.pid):
            return RunStartResult(task_instance=task_instance, previous_state=task_instance.state)
        if task_instance.state not in STARTABLE_STATES:
            raise TaskInstanceInvalidStateError(
                "TI was not in a state where it could be marked as running",
                previous_state=task_instance.state,
            )
        previous_state = task_instance.state
        task_instance.state = TaskInstanceState.RUNNING
        task_instance.hostname = run.hostname
        task_instance.unixname = run.unixname
        task_instance.pid = run.pid
        task_instance.start_date = run.start_date
        task_instance.end_date = None
        task_instance.duration = None
        task_instance.last_heartbeat_at = timezone.now()
        task_instance.failure_reason = ""
        task_instance.next_retry_at = None
        task_instance.save(
            update_fields=[
                "state",
                "hostname",
                "unixname",
                "pid",
                "start_date",
                "end_date",
                "duration",
                "last_heartbeat_at",
                "failure_reason",
                "next_retry_at",
                "updated_at",
            ]
        )
        dag_run_start(task_instance.dag_run, start_date=run.start_date)
    logger.debug("task instance %s running on %s pid %s", task_instance.pk, run.hostname, run.pid)
    return RunStartResult(task_instance=task_instance, previous_state=previous_state)


#: What ``skip-downstream`` leaves alone (Airflow's rule, apache/airflow#59378): task
#: instances executing or already finished one way or the other.
UNSKIPPABLE_STATES = (
    TaskInstanceState.RUNNING,
    TaskInstanceState.SUCCESS,
    TaskInstanceState.FAILED,
)


def task_instances_skip(
    *, task_instance_id: uuid.UUID | str, tasks: Collection[tuple[str, int]]
) -> int:
    """Skip ``tasks`` (``(task_id, map_index)``) of the task instance's run, as a branch or a
    short-circuit asks (``PATCH …/skip-downstream``): each becomes ``skipped`` (start and end
    now) unless it is running, succeeded or failed. The run's next task instances are decided
    when the calling one finishes. Two statements; returns how many were skipped.
    ``TaskInstanceNotFoundError`` for an unknown id."""
    found = TaskInstance.objects.filter(pk=task_instance_id).values_list("dag_run_id").first()
    if found is None:
        raise TaskInstanceNotFoundError(
            _not_found_message(task_instance_id), task_instance_id=str(task_instance_id)
        )
    if not tasks:
        return 0
    keys = Q()
    for task_id, map_index in tasks:
        keys |= Q(task_id=task_id, map_index=map_index)
    now = timezone.now()
    skipped = (
        TaskInstance.objects.filter(keys, dag_run_id=found[0])
        .filter(Q(state__isnull=True) | ~Q(state__in=UNSKIPPABLE_STATES))
        .update(
            state=TaskInstanceState.SKIPPED,
            start_date=now,
            end_date=now,
            duration=0.0,
            updated_at=now,
        )
    )
    logger.info(
        "task instance %s skipped %d downstream task instance(s)", task_instance_id, skipped
    )
    return skipped


def task_instance_failure_reason_record(*, task_instance_id: uuid.UUID | str, reason: str) -> bool:
    """Keep why a ``failed`` task instance failed when its runner could not say (the execution
    API's ``failed`` patch has no reason field): the worker's "no code to run". One ``UPDATE``;
    ``False`` when the task instance is not (or no longer) ``failed``."""
    return bool(
        TaskInstance.objects.filter(pk=task_instance_id, state=TaskInstanceState.FAILED).update(
            failure_reason=reason[:FAILURE_REASON_MAX_LENGTH]
        )
    )


def task_instance_heartbeat(
    *, task_instance_id: uuid.UUID | str, hostname: str, pid: int
) -> TaskInstance:
    """Record a heartbeat from the process running the TI."""
    with transaction.atomic():
        task_instance = _lock(task_instance_id)
        if (task_instance.hostname, task_instance.pid) != (hostname, pid):
            raise TaskInstanceRunningElsewhereError(
                current_hostname=task_instance.hostname, current_pid=task_instance.pid
            )
        if task_instance.state != TaskInstanceState.RUNNING:
            raise TaskInstanceNotRunningError(current_state=task_instance.state)
        task_instance.last_heartbeat_at = timezone.now()
        task_instance.save(update_fields=["last_heartbeat_at"])
    return task_instance


def task_instance_rendered_fields_set(
    *, task_instance_id: uuid.UUID | str, rendered_fields: dict[str, Any]
) -> TaskInstance:
    """Store the rendered template fields of a TI."""
    with transaction.atomic():
        task_instance = _lock(task_instance_id)
        task_instance.rendered_fields = rendered_fields
        task_instance.save(update_fields=["rendered_fields", "updated_at"])
    return task_instance


def task_instances_claim(*, limit: int) -> list[TaskInstance]:
    """Claim up to ``limit`` runnable task instances for a worker: ``scheduled`` → ``queued``.

    Oldest runs first; DAGs that are paused or stale are left alone, and no DAG gets more
    than its ``max_active_tasks`` task instances queued or running (Airflow's
    ``max_active_tasks``). ``FOR UPDATE SKIP LOCKED`` (PostgreSQL) means two workers claiming
    at once never get the same task instance, and the DAG rows are locked the same way while
    their active task instances are counted, so two claims never both fill a DAG's last
    slot (a DAG another transaction holds waits for the next claim); on SQLite the
    ``IMMEDIATE`` transaction serializes claims. Four statements. The caller then issues
    each a token and starts it (``/run`` moves it to ``running``).
    """
    if limit < 1:
        return []
    with transaction.atomic():
        candidates = list(
            TaskInstance.objects.select_for_update(skip_locked=True, of=("self",))
            .filter(
                state=TaskInstanceState.SCHEDULED,
                dag_run__dag__is_paused=False,
                dag_run__dag__is_stale=False,
            )
            .order_by("dag_run__run_after", "dag_run_id", "task_id", "map_index")[:limit]
        )
        if not candidates:
            return []
        caps = dict(
            Dag.objects.select_for_update(skip_locked=True, no_key=True)
            .filter(dag_id__in={ti.dag_id for ti in candidates})
            .values_list("dag_id", "max_active_tasks")
        )
        free = dict(caps)
        for dag_id, active in (
            TaskInstance.objects.filter(dag_id__in=caps, state__in=ACTIVE_STATES)
            .values("dag_id")
            .annotate(active=Count("pk"))
            .order_by()
            .values_list("dag_id", "active")
        ):
            free[dag_id] -= active
        claimed = []
        for task_instance in candidates:
            if free.get(task_instance.dag_id, 0) > 0:
                free[task_instance.dag_id] -= 1
                claimed.append(task_instance)
        if claimed:
            TaskInstance.objects.filter(pk__in=[ti.pk for ti in claimed]).update(
                state=TaskInstanceState.QUEUED, updated_at=timezone.now()
            )
            for task_instance in claimed:
                task_instance.state = TaskInstanceState.QUEUED
    return claimed


#: Task instances that count against their DAG's ``max_active_tasks``.
ACTIVE_STATES = (TaskInstanceState.QUEUED, TaskInstanceState.RUNNING)


def task_instances_unclaim(*, task_instance_ids: Collection[uuid.UUID | str]) -> int:
    """Give back claimed task instances that were never started: ``queued`` → ``scheduled``.

    For a worker that claimed them and then stopped, could not start them, or whose runner
    exited before ``/run``. Only rows still ``queued`` change (one conditional ``UPDATE``; on
    PostgreSQL it waits for a concurrent ``/run`` holding the row and then skips it), so a task
    instance a runner started meanwhile is left alone. Returns how many were given back.
    """
    if not task_instance_ids:
        return 0
    with transaction.atomic():
        return TaskInstance.objects.filter(
            pk__in=list(task_instance_ids), state=TaskInstanceState.QUEUED
        ).update(state=TaskInstanceState.SCHEDULED, updated_at=timezone.now())
