"""Task-instance state transitions a runner reports through the execution API
(docs/api-execution.md): the state patch (:func:`task_instance_state_update`), skipping
downstream task instances, the rendered fields, and why a task instance failed.

Each writes in one transaction that first locks the task-instance row (``SELECT … FOR
UPDATE`` on PostgreSQL; on SQLite the ``BEGIN IMMEDIATE`` transaction serializes writers),
then re-checks the state and writes; finishing (success, failed …), on every task's path,
does all three in one ``UPDATE … RETURNING`` (``_finish``).

A finished task instance moves its run on right after its transaction commits
(``advance.dag_run_progress``: its downstreams decided, the run settled when nothing is
left). A try that fails with tries left, or a sensor that asks to be rescheduled, goes
through ``tries``.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import Enum, StrEnum
from typing import Any

from django.db import connection, transaction
from django.db.models import Case, F, Q, When
from django.utils import timezone

from assets_app.exceptions import TaskInstanceInvalidStateError, TaskInstanceNotFoundError
from assets_app.models import (
    DagTask,
    TaskInstance,
    TaskInstanceHistory,
    TaskInstanceState,
    Trigger,
)
from assets_app.notify import TRIGGERS_CHANNEL, notify
from assets_app.outlets import AliasOutletEvent, AssetOutletEvent, OutletProfile
from assets_app.selectors.secrets import secrets_masker
from assets_app.services.assets.registration import asset_changes_register
from assets_app.services.runs.advance import NEVER_TRIED, dag_run_progress
from assets_app.services.runs.emails import FailureMail, failure_mail_on_commit, recipients_of
from assets_app.services.runs.settle import dag_run_ended, dag_run_settle_step
from assets_app.services.runs.tries import (
    task_instance_lock,
    task_instance_next_try,
    task_instance_not_found,
    task_instance_reschedule,
)
from assets_app.services.sql import (
    Dialect,
    Statement,
    Steps,
    column,
    column_values,
    columns,
    model_from_row,
    of,
    statements_cursor,
    table,
)

logger = logging.getLogger(__name__)

#: The longest ``failure_reason`` kept (a runner's ``retry_reason``, the worker's reason).
FAILURE_REASON_MAX_LENGTH = 500


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
    """A finished state other than success (``FINISHED_TI_STATES``): failed, skipped, removed
    or upstream_failed."""

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


# --- the state patch ----------------------------------------------------------------------


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
        return _defer(task_instance_id, payload)
    with transaction.atomic():
        task_instance = task_instance_lock(task_instance_id)
        if task_instance.state == payload.state:
            return _unchanged(task_instance_id, payload.state)
        if task_instance.state != TaskInstanceState.RUNNING:
            raise TaskInstanceInvalidStateError(previous_state=task_instance.state)
        if isinstance(payload, RetryPayload):
            _apply_retry(task_instance, payload)
        else:
            task_instance_reschedule(
                task_instance, reschedule_date=payload.reschedule_date, end_date=payload.end_date
            )
    logger.debug("task instance %s moved to %s", task_instance_id, payload.state)
    return StateUpdateOutcome.UPDATED


def _defer(task_instance_id: uuid.UUID | str, payload: DeferredPayload) -> StateUpdateOutcome:
    """A running task instance defers (Airflow's ``ti_update_state`` with a
    ``TIDeferredStatePayload``): a ``Trigger`` row is stored for a triggerer to run, and the
    task instance goes ``deferred`` with the method and arguments to resume with and the
    trigger's deadline (``trigger_timeout``: now + the payload's timeout). It holds no worker
    slot while deferred; a triggerer's event (or the scheduler at the deadline) schedules it
    again (``services.runs.triggers``). One stored ``deferred`` already → ``UNCHANGED``; any
    other state than ``running`` → ``TaskInstanceInvalidStateError``. Triggerers listening
    are woken at the commit."""
    now = timezone.now()
    with transaction.atomic():
        task_instance = task_instance_lock(task_instance_id)
        if task_instance.state == TaskInstanceState.DEFERRED:
            return _unchanged(task_instance_id, TaskInstanceState.DEFERRED)
        if task_instance.state != TaskInstanceState.RUNNING:
            raise TaskInstanceInvalidStateError(previous_state=task_instance.state)
        kwargs = payload.trigger_kwargs
        # a string is the client's own (encrypted) form, kept as is; an object is JSON text
        text = kwargs if isinstance(kwargs, str) else json.dumps({} if kwargs is None else kwargs)
        trigger = Trigger.objects.create(
            classpath=payload.classpath, kwargs=text, created_date=now, queue=payload.queue
        )
        task_instance.state = TaskInstanceState.DEFERRED
        task_instance.trigger = trigger
        task_instance.next_method = payload.next_method
        task_instance.next_kwargs = payload.next_kwargs
        task_instance.trigger_classpath = payload.classpath
        task_instance.trigger_kwargs = kwargs
        task_instance.trigger_timeout = (
            now + payload.trigger_timeout if payload.trigger_timeout is not None else None
        )
        fields = [
            "state",
            "trigger",
            "next_method",
            "next_kwargs",
            "trigger_classpath",
            "trigger_kwargs",
            "trigger_timeout",
            "updated_at",
        ]
        if payload.rendered_map_index is not KEEP:
            task_instance.rendered_map_index = payload.rendered_map_index
            fields.append("rendered_map_index")
        task_instance.save(update_fields=fields)
        notify(TRIGGERS_CHANNEL)
    logger.info(
        "task instance %s deferred to trigger %s (%s), resuming with %s",
        task_instance_id,
        trigger.pk,
        payload.classpath,
        payload.next_method,
    )
    return StateUpdateOutcome.UPDATED


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
    (``settle.dag_run_settle_step``: a one-task run's success is one statement). Otherwise,
    after the commit, the run moves on (``advance.dag_run_progress``: its ready downstreams
    ``scheduled`` and the workers woken — the hand-over —, and the run settled when nothing
    is left; see ``advance`` for why after the commit makes two upstreams finishing at once
    hand over exactly once). A retried report does it again, so a process that died between
    the two leaves nothing waiting; the scheduler's passes sweep any other.
    """
    registers = isinstance(payload, SuccessPayload) and bool(payload.task_outlets)
    with transaction.atomic() if registers else contextlib.nullcontext():
        finished, has_downstream, settled, callback = _finish_update(task_instance_id, payload)
        if finished is None:
            dag_run_id = _finish_refused(task_instance_id, payload.state)
            has_downstream = True  # a retried report: hand over again (it may have died before)
        else:
            dag_run_id = finished.dag_run_id
            if registers:
                assert isinstance(payload, SuccessPayload)  # noqa: S101 - narrows the type for mypy
                _register_asset_changes(finished, payload)
    if settled:
        dag_run_ended(dag_run_id, dag_id=finished.dag_id if finished else "", callback=callback)
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
) -> tuple[TaskInstance | None, bool, bool, str | None]:
    """The finishing ``UPDATE``: the task instance as it is now (``None`` if it was not
    running), whether its task has downstreams, whether the statement ended the run, and
    then the state whose DAG-level callback it asks for (``settle.dag_run_ended``)."""
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
    mails = payload.state == TaskInstanceState.FAILED
    statement = _finish_sql(
        sql,
        clears_next=isinstance(payload, SuccessPayload),
        sets_rendered_map_index=sets_rendered_map_index,
        mails=mails,
    )
    if sql.postgresql:
        joined = Steps(
            steps=(
                (_FINISHED_STEP, Statement(statement, params)),
                ("settled", dag_run_settle_step(finished=_FINISHED_STEP, end_date=now)),
            ),
            last=Statement(
                f"SELECT {_FINISHED_STEP}.*, EXISTS (SELECT 1 FROM settled), "  # noqa: S608 - fixed names
                f"(SELECT s.callback FROM settled AS s(callback)) FROM {_FINISHED_STEP}",
                [],
            ),
        ).statement()
        statement, params = joined.text, list(joined.params)
    with statements_cursor() as cursor:
        cursor.execute(statement, params)
        row = cursor.fetchone()
    if row is None:
        return None, False, False, None
    end = len(_FINISH_RETURNING) + (len(_MAIL_RETURNING) if mails else 0)
    settled = bool(row[end]) if sql.postgresql else False
    callback = row[end + 1] if sql.postgresql else None
    finished = model_from_row(TaskInstance, _FINISH_RETURNING, row[: len(_FINISH_RETURNING)])
    if mails:
        _failure_mail(finished, row[len(_FINISH_RETURNING) : end])
    return finished, finished.has_downstream, settled, callback


#: What the finishing ``UPDATE`` of a ``failed`` report also returns: the task's ``email``
#: when ``email_on_failure`` (else ``NULL``), the try's ``max_tries`` and host (``emails``)
_MAIL_RETURNING = ("email", "max_tries", "hostname")


def _mail_returning() -> str:
    t, ti = of("mail_task", DagTask), table(TaskInstance)
    col = functools.partial(column, TaskInstance)
    return (
        f"(SELECT {t('email')} FROM {table(DagTask)} mail_task "  # noqa: S608 - names from the models
        f"WHERE {t('dag')} = {ti}.{col('dag_id')} AND {t('task_id')} = {ti}.{col('task_id')} "
        f"AND {t('email_on_failure')}), {ti}.{col('max_tries')}, {ti}.{col('hostname')}"
    )


def _failure_mail(finished: TaskInstance, values: Sequence[Any]) -> None:
    """Mail the ``failed`` try's task's addresses after this report commits (``emails``)."""
    email, max_tries, hostname = values
    (recipients,) = column_values(DagTask, "email", [email]) if email is not None else [None]
    if not recipients:
        return
    failure_mail_on_commit(
        FailureMail(
            recipients=recipients_of(recipients),
            dag_id=finished.dag_id,
            task_id=finished.task_id,
            run_id=finished.run_id,
            map_index=finished.map_index,
            try_number=finished.try_number,
            max_tries=max_tries,
            state=TaskInstanceState.FAILED.value,
            hostname=hostname or "",
        )
    )


_FINISHED_STEP = "finished"


@functools.cache
def _finish_sql(
    sql: Dialect, *, clears_next: bool, sets_rendered_map_index: bool, mails: bool = False
) -> str:
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
        + (f", {_mail_returning()}" if mails else "")
    )


def _finish_refused(task_instance_id: uuid.UUID | str, state: str) -> int:
    """Why the finishing ``UPDATE`` matched no row: raise, or return the run of a task
    instance already in ``state`` (a retried report)."""
    found = (
        TaskInstance.objects.filter(pk=task_instance_id).values_list("state", "dag_run_id").first()
    )
    if found is None:
        raise task_instance_not_found(task_instance_id)
    current, dag_run_id = found
    if current != state:
        raise TaskInstanceInvalidStateError(previous_state=current)
    return dag_run_id


def _register_asset_changes(task_instance: TaskInstance, payload: SuccessPayload) -> None:
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


# --- other writes of a running task instance ----------------------------------------------


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
        raise task_instance_not_found(task_instance_id)
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
            # one not scheduled yet was never tried (advance.NEVER_TRIED)
            try_number=Case(When(state__isnull=True, then=NEVER_TRIED), default=F("try_number")),
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
    """Keep why a try failed when its runner could not say (the execution API's ``failed``
    patch has no reason field, and a runner may send an ``up_for_retry`` without one): the
    worker's "no code to run", the error line of the try's log. The try is the task instance
    itself while it is ``failed``, else the ``TaskInstanceHistory`` row it left when it went up
    for retry. A reason already kept stays; the reason is masked as a log line is. One or two
    ``UPDATE``s; ``False`` when no such try is waiting for a reason."""
    kept = secrets_masker().mask(reason)[:FAILURE_REASON_MAX_LENGTH]
    if TaskInstance.objects.filter(
        pk=task_instance_id, state=TaskInstanceState.FAILED, failure_reason=""
    ).update(failure_reason=kept):
        return True
    return bool(
        TaskInstanceHistory.objects.filter(
            task_instance_id=task_instance_id,
            state=TaskInstanceState.FAILED,
            failure_reason="",
        ).update(failure_reason=kept)
    )


def task_instance_rendered_fields_set(
    *, task_instance_id: uuid.UUID | str, rendered_fields: dict[str, Any]
) -> TaskInstance:
    """Store the rendered template fields of a TI."""
    with transaction.atomic():
        task_instance = task_instance_lock(task_instance_id)
        task_instance.rendered_fields = rendered_fields
        task_instance.save(update_fields=["rendered_fields", "updated_at"])
    return task_instance


def task_instance_rendered_map_index_set(
    *, task_instance_id: uuid.UUID | str, rendered_map_index: str
) -> None:
    """Store a mapped task instance's label (its ``map_index_template`` rendered by its
    runner), shown beside its map index; ``TaskInstanceNotFoundError`` without it."""
    updated = TaskInstance.objects.filter(pk=task_instance_id).update(
        rendered_map_index=rendered_map_index, updated_at=timezone.now()
    )
    if not updated:
        raise TaskInstanceNotFoundError(task_instance_id=str(task_instance_id))
