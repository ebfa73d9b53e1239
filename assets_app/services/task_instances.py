"""Task-instance state transitions driven by the execution API (SPEC §3.1, §3.2).

Each public function is one transaction that first locks the task-instance row
(``SELECT … FOR UPDATE`` on PostgreSQL; on SQLite the ``BEGIN IMMEDIATE`` transaction
serializes writers), then re-checks the state and writes.
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import Enum, StrEnum
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from assets_app.exceptions import (
    TaskInstanceInvalidStateError,
    TaskInstanceNotFoundError,
    TaskInstanceNotRunningError,
    TaskInstanceRunningElsewhereError,
)
from assets_app.models import TaskInstance, TaskInstanceState
from assets_app.outlets import AliasOutletEvent, AssetOutletEvent, OutletProfile

logger = logging.getLogger(__name__)

STARTABLE_STATES = frozenset({TaskInstanceState.QUEUED, TaskInstanceState.RESTARTING})


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
        if self.previous_state == TaskInstanceState.RESTARTING:
            return True  # cleared while running: always eligible for a retry
        ti = self.task_instance
        return ti.max_tries != 0 and ti.try_number <= ti.max_tries


# --- helpers ------------------------------------------------------------------------------


def _lock(task_instance_id: uuid.UUID | str, *, with_dag_run: bool = False) -> TaskInstance:
    """Lock and return the task instance; call inside ``transaction.atomic``.

    One statement by primary key, no ``ORDER BY`` and no join (``with_dag_run`` adds the run,
    in the same statement), its SQL built once per process: this is on every request's path.
    """
    if with_dag_run:
        try:
            return (
                TaskInstance.objects.select_for_update(of=("self",))
                .select_related("dag_run")
                .get(pk=task_instance_id)
            )
        except TaskInstance.DoesNotExist:
            raise TaskInstanceNotFoundError(task_instance_id=str(task_instance_id)) from None
    pk = TaskInstance._meta.pk.get_db_prep_value(task_instance_id, connection)
    found = list(TaskInstance.objects.raw(_lock_statement(connection.vendor), [pk]))
    if not found:
        raise TaskInstanceNotFoundError(task_instance_id=str(task_instance_id))
    return found[0]


@functools.cache
def _lock_statement(vendor: str) -> str:
    """``SELECT`` every column of one task instance by id, ``FOR UPDATE`` where supported."""
    quote = connection.ops.quote_name
    meta = TaskInstance._meta
    columns = ", ".join(quote(field.column) for field in meta.concrete_fields)
    lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
    return f"SELECT {columns} FROM {quote(meta.db_table)} WHERE {quote(meta.pk.column)} = %s{lock}"


def _duration(task_instance: TaskInstance, end_date: datetime) -> float | None:
    if task_instance.start_date is None:
        return None
    return (end_date - task_instance.start_date).total_seconds()


def _apply_rendered_map_index(
    task_instance: TaskInstance, payload: SuccessPayload | TerminalPayload | DeferredPayload
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
    """Apply a state patch (SPEC §3.1) in one transaction with the TI row locked.

    The same state as stored → ``UNCHANGED`` and nothing is written (a retried success never
    duplicates events); otherwise the TI must be ``running``. A success also registers the
    asset changes, in the same transaction.
    """
    with transaction.atomic():
        task_instance = _lock(task_instance_id)
        if task_instance.state == payload.state:
            logger.debug(
                "task instance %s already in state %s; nothing written",
                task_instance.pk,
                payload.state,
            )
            return StateUpdateOutcome.UNCHANGED
        if task_instance.state != TaskInstanceState.RUNNING:
            raise TaskInstanceInvalidStateError(previous_state=task_instance.state)

        fields = _APPLY[type(payload)](task_instance, payload)
        task_instance.save(update_fields=[*fields, "updated_at"])
        if isinstance(payload, SuccessPayload):
            _register_asset_changes(task_instance, payload)
    logger.debug("task instance %s moved to %s", task_instance.pk, payload.state)
    return StateUpdateOutcome.UPDATED


def _register_asset_changes(task_instance: TaskInstance, payload: SuccessPayload) -> None:
    # Imported here: the registration service is a separate module with its own owner.
    from assets_app.services.registration import asset_changes_register

    asset_changes_register(
        task_instance=task_instance,
        task_outlets=payload.task_outlets,
        outlet_events=payload.outlet_events,
    )


def _apply_success(task_instance: TaskInstance, payload: SuccessPayload) -> list[str]:
    task_instance.state = TaskInstanceState.SUCCESS
    task_instance.end_date = payload.end_date
    task_instance.duration = _duration(task_instance, payload.end_date)
    task_instance.next_method = None
    task_instance.next_kwargs = None
    return [
        "state",
        "end_date",
        "duration",
        "next_method",
        "next_kwargs",
        *_apply_rendered_map_index(task_instance, payload),
    ]


def _apply_terminal(
    task_instance: TaskInstance, payload: TerminalPayload | RetryPayload
) -> list[str]:
    task_instance.state = payload.state
    task_instance.end_date = payload.end_date
    task_instance.duration = _duration(task_instance, payload.end_date)
    return ["state", "end_date", "duration", *_apply_rendered_map_index(task_instance, payload)]


def _apply_retry(task_instance: TaskInstance, payload: RetryPayload) -> list[str]:
    if payload.retry_reason or payload.retry_delay_seconds is not None:
        logger.info(
            "task instance %s up for retry (delay %s s): %s",
            task_instance.pk,
            payload.retry_delay_seconds,
            payload.retry_reason,
        )
    return _apply_terminal(task_instance, payload)


def _apply_reschedule(task_instance: TaskInstance, payload: ReschedulePayload) -> list[str]:
    task_instance.state = TaskInstanceState.UP_FOR_RESCHEDULE
    task_instance.reschedule_date = payload.reschedule_date
    task_instance.end_date = payload.end_date
    task_instance.duration = _duration(task_instance, payload.end_date)
    task_instance.task_reschedule_count += 1  # safe: the row is locked
    return ["state", "reschedule_date", "end_date", "duration", "task_reschedule_count"]


def _apply_deferred(task_instance: TaskInstance, payload: DeferredPayload) -> list[str]:
    task_instance.state = TaskInstanceState.DEFERRED
    task_instance.trigger_classpath = payload.classpath
    task_instance.trigger_kwargs = payload.trigger_kwargs
    task_instance.trigger_timeout = (
        timezone.now() + payload.trigger_timeout if payload.trigger_timeout is not None else None
    )
    task_instance.next_method = payload.next_method
    task_instance.next_kwargs = payload.next_kwargs
    return [
        "state",
        "trigger_classpath",
        "trigger_kwargs",
        "trigger_timeout",
        "next_method",
        "next_kwargs",
        *_apply_rendered_map_index(task_instance, payload),
    ]


_APPLY: dict[type, Any] = {
    SuccessPayload: _apply_success,
    TerminalPayload: _apply_terminal,
    RetryPayload: _apply_retry,
    ReschedulePayload: _apply_reschedule,
    DeferredPayload: _apply_deferred,
}


def task_instance_run_start(*, task_instance_id: uuid.UUID | str, run: RunStart) -> RunStartResult:
    """Move a ``queued``/``restarting`` TI to ``running`` (SPEC §3.2 ``/run``).

    A repeat from the same hostname, unixname and pid while running succeeds again without
    writing; anything else raises ``TaskInstanceInvalidStateError``.
    """
    with transaction.atomic():
        task_instance = _lock(task_instance_id, with_dag_run=True)
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
                "updated_at",
            ]
        )
    logger.debug("task instance %s running on %s pid %s", task_instance.pk, run.hostname, run.pid)
    return RunStartResult(task_instance=task_instance, previous_state=previous_state)


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

    Oldest runs first; DAGs that are paused or stale are left alone. ``FOR UPDATE SKIP LOCKED``
    (PostgreSQL) means two workers claiming at once never get the same task instance; on SQLite
    the ``IMMEDIATE`` transaction serializes claims. The caller then issues each a token and
    starts it (``/run`` moves it to ``running``).
    """
    if limit < 1:
        return []
    with transaction.atomic():
        claimed = list(
            TaskInstance.objects.select_for_update(skip_locked=True, of=("self",))
            .filter(
                state=TaskInstanceState.SCHEDULED,
                dag_run__dag__is_paused=False,
                dag_run__dag__is_stale=False,
            )
            .order_by("dag_run__run_after", "dag_run_id", "task_id", "map_index")[:limit]
        )
        if claimed:
            TaskInstance.objects.filter(pk__in=[ti.pk for ti in claimed]).update(
                state=TaskInstanceState.QUEUED, updated_at=timezone.now()
            )
            for task_instance in claimed:
                task_instance.state = TaskInstanceState.QUEUED
    return claimed
