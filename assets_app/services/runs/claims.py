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
import math
import uuid
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Count, OuterRef, Q, QuerySet, Subquery, Sum
from django.utils import timezone

from assets_app.exceptions import (
    TaskInstanceInvalidStateError,
    TaskInstanceNotRunningError,
    TaskInstanceRunningElsewhereError,
)
from assets_app.models import Dag, DagTask, Pool, TaskInstance, TaskInstanceState
from assets_app.services.runs.settle import dag_run_start
from assets_app.services.runs.tries import is_eligible_to_retry, task_instance_lock
from assets_app.services.runs.triggers import starts_in_triggerer

logger = logging.getLogger(__name__)

STARTABLE_STATES = frozenset({TaskInstanceState.QUEUED, TaskInstanceState.RESTARTING})
#: Task instances that count against their run's ``max_active_tasks`` (Airflow's
#: ``EXECUTION_STATES``) and take their pool's slots.
ACTIVE_STATES = (TaskInstanceState.QUEUED, TaskInstanceState.RUNNING)
#: Task instances that count against ``max_active_tis_per_dag`` / ``_per_dagrun`` (Airflow's
#: ``ACTIVE_STATES``: deferred ones too).
TASK_ACTIVE_STATES = (*ACTIVE_STATES, TaskInstanceState.DEFERRED)
#: What a pool's occupied slots are counted over (deferred only if it ``include_deferred``).
POOL_OCCUPYING_STATES = TASK_ACTIVE_STATES


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
        if not task_instance.next_kwargs:  # resuming from a deferral keeps its start (Airflow)
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


#: How many more candidates than asked for a claim reads per pass (some may be held back by a
#: pool or a limit), and how many passes it makes at most.
CANDIDATE_MARGIN = 16
CLAIM_PASSES = 3


@dataclass
class _Room:
    """What a claim may still start: each locked pool's open slots, each locked DAG's
    ``max_active_tasks`` and its active task instances per run, task and run-task."""

    open_slots: dict[str, float]
    total_slots: dict[str, float]
    max_active_tasks: dict[str, int] = field(default_factory=dict)
    per_run: Counter[tuple[str, str]] = field(default_factory=Counter)
    per_task: Counter[tuple[str, str]] = field(default_factory=Counter)
    per_run_task: Counter[tuple[str, str, str]] = field(default_factory=Counter)

    def take(self, ti: TaskInstance) -> None:
        """Count ``ti`` as queued."""
        self.open_slots[ti.pool] -= ti.pool_slots
        self.per_run[ti.dag_id, ti.run_id] += 1
        self.per_task[ti.dag_id, ti.task_id] += 1
        self.per_run_task[ti.dag_id, ti.run_id, ti.task_id] += 1


def _pools_lock() -> _Room:
    """Lock the pools that scheduled task instances name, in name order (``FOR UPDATE``:
    two claims wait for each other here, so one counts what the other queued), then count
    their occupied slots — 2 statements; the count runs after the lock, so on PostgreSQL it
    sees what a claim that held the lock committed."""
    pools = list(
        Pool.objects.select_for_update()
        .filter(
            pool__in=TaskInstance.objects.filter(state=TaskInstanceState.SCHEDULED)
            .values("pool")
            .distinct()
        )
        .order_by("pool")
        .values_list("pool", "slots", "include_deferred")
    )
    total: dict[str, float] = {
        name: math.inf if slots == -1 else float(slots) for name, slots, _ in pools
    }
    open_slots = dict(total)
    if pools:
        deferred_counts = {name for name, _, include_deferred in pools if include_deferred}
        for name, state, used in (
            TaskInstance.objects.filter(pool__in=total, state__in=POOL_OCCUPYING_STATES)
            .values("pool", "state")
            .annotate(used=Sum("pool_slots"))
            .order_by()
            .values_list("pool", "state", "used")
        ):
            if state != TaskInstanceState.DEFERRED or name in deferred_counts:
                open_slots[name] -= used or 0
    return _Room(open_slots=open_slots, total_slots=total)


def _dags_lock(room: _Room, dag_ids: set[str]) -> set[str]:
    """Lock the rows of ``dag_ids`` not locked yet (``SKIP LOCKED``: a DAG another claim holds
    waits for the next claim) and count their active task instances (2 statements); the DAGs
    this claim holds from now on."""
    wanted = dag_ids - room.max_active_tasks.keys()
    if not wanted:
        return set(room.max_active_tasks)
    caps = dict(
        Dag.objects.select_for_update(skip_locked=True, no_key=True)
        .filter(dag_id__in=wanted)
        .values_list("dag_id", "max_active_tasks")
    )
    if caps:
        for dag_id, run_id, task_id, state, count in (
            TaskInstance.objects.filter(dag_id__in=caps, state__in=TASK_ACTIVE_STATES)
            .values("dag_id", "run_id", "task_id", "state")
            .annotate(count=Count("pk"))
            .order_by()
            .values_list("dag_id", "run_id", "task_id", "state", "count")
        ):
            room.per_task[dag_id, task_id] += count
            room.per_run_task[dag_id, run_id, task_id] += count
            if state in ACTIVE_STATES:  # deferred holds no worker slot (Airflow)
                room.per_run[dag_id, run_id] += count
    room.max_active_tasks.update(caps)
    return set(room.max_active_tasks)


def task_instances_claim(*, limit: int) -> list[TaskInstance]:
    """Claim up to ``limit`` runnable task instances for a worker: ``scheduled`` → ``queued``.

    What Airflow's scheduler checks before it queues one (``_executable_task_instances_to_
    queued``, docs/pools.md): its pool exists and has ``pool_slots`` open (its slots minus the
    slots of its queued and running task instances, and of its deferred ones when the pool
    ``include_deferred``; -1 slots is unlimited), its task has fewer than
    ``max_active_tis_per_dag`` task instances queued, running or deferred, and fewer than
    ``max_active_tis_per_dagrun`` in its run, and its run fewer than its DAG's
    ``max_active_tasks`` queued or running. Among those, the highest ``priority_weight``
    first, then the oldest run (``run_after``), then the task id and ``map_index``; DAGs paused or
    stale are left alone. A task instance whose pool does not exist is never claimed
    (Airflow's too).

    Locks, in this order: the pools of scheduled task instances (``FOR UPDATE``, by name: two
    claims on PostgreSQL wait for each other, so a pool is never over-filled), the candidate
    task instances (``FOR UPDATE SKIP LOCKED``: two claims never get the same one) and their
    DAGs' rows (``SKIP LOCKED``, guarding the per-DAG, per-run and per-task counts); on SQLite
    the ``IMMEDIATE`` transaction serializes claims. Statements: one when no pool has a
    scheduled task instance, six for a claim that one pass of candidates serves, at most
    ``2 + 3 * CLAIM_PASSES + 1``: a pass held back by a pool or a limit reads again without
    what held it back. The caller then issues each a token and starts it (``/run`` moves it
    to ``running``).
    """
    if limit < 1:
        return []
    claimed: list[TaskInstance] = []
    with transaction.atomic():
        room = _pools_lock()
        starved = _Starved()
        for _ in range(CLAIM_PASSES):
            open_pools = [name for name, free in room.open_slots.items() if free > 0]
            if not open_pools:
                break
            window = limit - len(claimed) + CANDIDATE_MARGIN
            candidates = list(starved.exclude(_candidates(open_pools))[:window])
            if not candidates:
                break
            starved.seen.update(ti.pk for ti in candidates)
            held = _dags_lock(room, {ti.dag_id for ti in candidates})
            for ti in candidates:
                if len(claimed) >= limit:
                    break
                reason = _held_back(room, ti, held)
                if reason is None:
                    claimed.append(ti)
                    room.take(ti)
                else:
                    starved.add(reason, ti)
            if len(claimed) >= limit or len(candidates) < window:
                break
        if claimed:
            TaskInstance.objects.filter(pk__in=[ti.pk for ti in claimed]).update(
                state=TaskInstanceState.QUEUED, updated_at=timezone.now()
            )
            for task_instance in claimed:
                task_instance.state = TaskInstanceState.QUEUED
    return claimed


@dataclass
class _Starved:
    """What an earlier pass of a claim held back, left out of the next one (Airflow's
    ``starved_dags``, ``starved_tasks``, …): the task instances it read, DAGs another claim
    holds, runs at their ``max_active_tasks``, tasks at a limit."""

    seen: set[Any] = field(default_factory=set)
    dags: set[str] = field(default_factory=set)
    runs: set[tuple[str, str]] = field(default_factory=set)
    tasks: set[tuple[str, str]] = field(default_factory=set)
    run_tasks: set[tuple[str, str, str]] = field(default_factory=set)

    def add(self, reason: str, ti: TaskInstance) -> None:
        if reason == "dag":
            self.dags.add(ti.dag_id)
        elif reason == "run":
            self.runs.add((ti.dag_id, ti.run_id))
        elif reason == "run_task":
            self.run_tasks.add((ti.dag_id, ti.run_id, ti.task_id))
        elif reason == "task":
            self.tasks.add((ti.dag_id, ti.task_id))
        # "pool": a pool with no slot left drops out of the open pools

    def exclude(self, queryset: QuerySet[TaskInstance]) -> QuerySet[TaskInstance]:
        if self.seen:
            queryset = queryset.exclude(pk__in=list(self.seen))
        if self.dags:
            queryset = queryset.exclude(dag_id__in=list(self.dags))
        excluded = Q()
        for dag_id, task_id in self.tasks:
            excluded |= Q(dag_id=dag_id, task_id=task_id)
        for dag_id, run_id, task_id in self.run_tasks:
            excluded |= Q(dag_id=dag_id, run_id=run_id, task_id=task_id)
        for dag_id, run_id in self.runs:
            excluded |= Q(dag_id=dag_id, run_id=run_id)
        return queryset.exclude(excluded) if excluded else queryset


def _candidates(open_pools: list[str]) -> QuerySet[TaskInstance]:
    """Scheduled task instances in open pools of unpaused DAGs, best first, locked ``SKIP
    LOCKED``, with their task's limits."""
    declared = DagTask.objects.filter(dag_id=OuterRef("dag_id"), task_id=OuterRef("task_id"))
    return (
        TaskInstance.objects.select_for_update(skip_locked=True, of=("self",))
        .filter(
            state=TaskInstanceState.SCHEDULED,
            pool__in=open_pools,
            dag_run__dag__is_paused=False,
            dag_run__dag__is_stale=False,
        )
        .exclude(starts_in_triggerer())  # a triggerer starts it (runs.triggers)
        .annotate(
            max_per_dag=Subquery(declared.values("max_active_tis_per_dag")[:1]),
            max_per_dagrun=Subquery(declared.values("max_active_tis_per_dagrun")[:1]),
        )
        .order_by("-priority_weight", "dag_run__run_after", "dag_run_id", "task_id", "map_index")
    )


def _held_back(room: _Room, ti: TaskInstance, held: set[str]) -> str | None:
    """What keeps ``ti`` from being claimed now (``None``: nothing)."""
    if ti.dag_id not in held:
        return "dag"
    open_slots = room.open_slots.get(ti.pool, 0)
    if open_slots <= 0:
        return "pool"
    if ti.pool_slots > open_slots:
        return "task"  # Airflow: a lower-priority task instance may still fit
    if room.per_run[ti.dag_id, ti.run_id] >= room.max_active_tasks[ti.dag_id]:
        return "run"
    max_per_dag = getattr(ti, "max_per_dag", None)
    if max_per_dag is not None and room.per_task[ti.dag_id, ti.task_id] >= max_per_dag:
        return "task"
    max_per_dagrun = getattr(ti, "max_per_dagrun", None)
    if (
        max_per_dagrun is not None
        and room.per_run_task[ti.dag_id, ti.run_id, ti.task_id] >= max_per_dagrun
    ):
        return "run_task"
    return None


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
