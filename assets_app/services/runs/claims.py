"""Who runs a task instance: a worker claims it (``scheduled`` → ``queued``,
:func:`task_instances_claim`) or gives it back unstarted (:func:`task_instances_unclaim`); a
runner process starts it (``/run``: ``queued`` → ``running``, bound to its hostname, unixname
and pid, :func:`task_instance_run_start`) and keeps it by its heartbeat
(:func:`task_instance_heartbeat`: refused to any other process).

The start and the heartbeat each lock the task-instance row first (``SELECT … FOR UPDATE``
on PostgreSQL; on SQLite the ``BEGIN IMMEDIATE`` transaction serializes writers), then
re-check the state and write; the first task instance to start moves its run to ``running``
(``settle.dag_run_start``).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from assets_app.exceptions import (
    TaskInstanceInvalidStateError,
    TaskInstanceNotRunningError,
    TaskInstanceRunningElsewhereError,
)
from assets_app.models import Dag, TaskInstance, TaskInstanceState
from assets_app.services.runs.settle import dag_run_start
from assets_app.services.runs.tries import is_eligible_to_retry, task_instance_lock

logger = logging.getLogger(__name__)

STARTABLE_STATES = frozenset({TaskInstanceState.QUEUED, TaskInstanceState.RESTARTING})
#: Task instances that count against their DAG's ``max_active_tasks``.
ACTIVE_STATES = (TaskInstanceState.QUEUED, TaskInstanceState.RUNNING)


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


def task_instance_run_start(*, task_instance_id: uuid.UUID | str, run: RunStart) -> RunStartResult:
    """Move a ``queued``/``restarting`` TI to ``running`` (``/run``, docs/api-execution.md).

    A repeat from the same hostname, unixname and pid while running succeeds again without
    writing; anything else raises ``TaskInstanceInvalidStateError``.
    """
    with transaction.atomic():
        task_instance = task_instance_lock(task_instance_id, load_run=True)
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


def task_instance_heartbeat(
    *, task_instance_id: uuid.UUID | str, hostname: str, pid: int
) -> TaskInstance:
    """Record a heartbeat from the process running the TI."""
    with transaction.atomic():
        task_instance = task_instance_lock(task_instance_id)
        if (task_instance.hostname, task_instance.pid) != (hostname, pid):
            raise TaskInstanceRunningElsewhereError(
                current_hostname=task_instance.hostname, current_pid=task_instance.pid
            )
        if task_instance.state != TaskInstanceState.RUNNING:
            raise TaskInstanceNotRunningError(current_state=task_instance.state)
        task_instance.last_heartbeat_at = timezone.now()
        task_instance.save(update_fields=["last_heartbeat_at"])
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
