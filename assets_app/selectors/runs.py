"""Read-side queries of DAG runs, task instances and pools."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Count, Min, OuterRef, Q, QuerySet, Subquery, Sum, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from assets_app.exceptions import DagRunNotFoundError, PoolNotFoundError
from assets_app.models import (
    DEFAULT_QUEUE,
    TOKEN_REFRESH_TI_STATES,
    DagRun,
    DagTask,
    Pool,
    TaskInstance,
    TaskInstanceState,
    Triggerer,
)


def dag_run_list() -> QuerySet[DagRun]:
    """DAG runs with their note (joined), for both operator faces."""
    return DagRun.objects.select_related("dag_run_note")


def dag_run_get(*, dag_id: str, run_id: str) -> DagRun:
    """The run ``run_id`` of ``dag_id`` with its note, else ``DagRunNotFoundError``."""
    found = dag_run_list().filter(dag_id=dag_id, run_id=run_id).first()
    if found is None:
        raise DagRunNotFoundError(
            f"The DagRun with dag_id: `{dag_id}` and run_id: `{run_id}` was not found"
        )
    return found


def task_instances_of_run(*, dag_id: str, run_id: str) -> QuerySet[TaskInstance]:
    """The run's task instances with the run, and a deferred one's trigger and the triggerer
    running it (joined)."""
    return TaskInstance.objects.select_related("dag_run", "trigger__triggerer").filter(
        dag_id=dag_id, run_id=run_id
    )


def task_instance_token_renewable(task_instance_id: str) -> bool:
    """Whether the token of ``task_instance_id`` may be refreshed: the task instance is still
    this try (a retry moves on under a new id) and its runner may still call the API for it
    (``TOKEN_REFRESH_TI_STATES``). 1 query."""
    return TaskInstance.objects.filter(
        pk=task_instance_id, state__in=TOKEN_REFRESH_TI_STATES
    ).exists()


def dag_run_state_counts(*, dag_ids: list[str] | None = None) -> dict[str, dict[str, int]]:
    """Each DAG's number of runs in each state (Airflow's ``dagStats``), the DAGs that have
    runs, by id; only ``dag_ids`` when given. One ``GROUP BY``."""
    rows = DagRun.objects.order_by()
    if dag_ids:
        rows = rows.filter(dag_id__in=dag_ids)
    counts: dict[str, dict[str, int]] = {}
    for dag_id, state, count in (
        rows.values_list("dag_id", "state").annotate(count=Count("pk")).order_by("dag_id")
    ):
        counts.setdefault(dag_id, {})[state] = count
    return counts


@dataclass(frozen=True)
class PoolSlots:
    """A pool's slots as Airflow's ``Pool.slots_stats`` counts them (``open`` -1: unlimited)."""

    running: int = 0
    queued: int = 0
    scheduled: int = 0
    deferred: int = 0

    def occupied(self, pool: Pool) -> int:
        return self.running + self.queued + (self.deferred if pool.include_deferred else 0)

    def open(self, pool: Pool) -> int:
        return -1 if pool.slots == -1 else pool.slots - self.occupied(pool)


_POOL_STATES = {
    TaskInstanceState.RUNNING: "running",
    TaskInstanceState.QUEUED: "queued",
    TaskInstanceState.SCHEDULED: "scheduled",
    TaskInstanceState.DEFERRED: "deferred",
}


def pool_list() -> QuerySet[Pool]:
    """Every pool, by name."""
    return Pool.objects.order_by("pool")


def pool_get(*, name: str) -> Pool:
    """The pool ``name``, else ``PoolNotFoundError``."""
    found = Pool.objects.filter(pool=name).first()
    if found is None:
        raise PoolNotFoundError(f"The Pool with name: `{name}` was not found")
    return found


def pools_slots(names: Iterable[str]) -> dict[str, PoolSlots]:
    """Each named pool's slots by the state of the task instances taking them (1 query)."""
    names = list(names)
    counts: dict[str, dict[str, int]] = {name: {} for name in names}
    if names:
        for name, state, used in (
            TaskInstance.objects.filter(pool__in=names, state__in=list(_POOL_STATES))
            .values("pool", "state")
            .annotate(used=Sum("pool_slots"))
            .order_by()
            .values_list("pool", "state", "used")
        ):
            counts[name][_POOL_STATES[TaskInstanceState(str(state))]] = int(used or 0)
    return {name: PoolSlots(**values) for name, values in counts.items()}


def triggerer_alive() -> bool:
    """Whether a ``manage.py triggerer`` is alive: its heartbeat younger than
    ``TRIGGERER_HEALTH_CHECK_THRESHOLD`` and not stopped (1 query; docs/triggerer.md)."""
    cutoff = timezone.now() - timedelta(seconds=float(settings.TRIGGERER_HEALTH_CHECK_THRESHOLD))
    return Triggerer.objects.filter(heartbeat__gte=cutoff, ended_at__isnull=True).exists()


#: What a deferred task instance waits on when no triggerer is alive.
NO_TRIGGERER_ALIVE = (
    "no triggerer is alive (manage.py triggerer, docs/triggerer.md): it waits until one "
    "runs, or fails at its trigger's timeout"
)


def task_instance_waiting_reason(task_instance: TaskInstance) -> str | None:
    """Why a ``scheduled`` task instance is not claimed by its pool (1 query), else ``None``:
    its pool does not exist (it never runs until one is created, as in Airflow), or takes
    more slots than the pool has. A ``deferred`` one waits for its trigger (and says when no
    triggerer is alive to run it)."""
    if task_instance.state == TaskInstanceState.DEFERRED:
        deadline = (
            f", or fails at its timeout {task_instance.trigger_timeout.isoformat()}"
            if task_instance.trigger_timeout
            else ""
        )
        waits = f"its trigger {task_instance.trigger_classpath} to fire{deadline}"
        return waits if triggerer_alive() else f"{waits}; {NO_TRIGGERER_ALIVE}"
    if task_instance.state != TaskInstanceState.SCHEDULED:
        return None
    pool = Pool.objects.filter(pool=task_instance.pool).first()
    if pool is None:
        return (
            f"its pool {task_instance.pool!r} does not exist: it will not run until the pool "
            "is created"
        )
    if pool.slots != -1 and task_instance.pool_slots > pool.slots:
        return (
            f"it takes {task_instance.pool_slots} slots of pool {pool.pool!r}, which has "
            f"{pool.slots}: it will not run until the pool has as many"
        )
    return None


@dataclass(frozen=True)
class QueueDepth:
    """The task instances waiting on one task queue (``DagTask.queue``): ``queued`` (handed to
    the executor, not started), the oldest of them since when, and ``scheduled`` (runnable,
    not yet handed over: pools, limits, or no pass yet)."""

    queue: str
    queued: int
    scheduled: int
    oldest_queued_at: datetime | None


def task_instances_by_queue() -> list[QueueDepth]:
    """Per task queue, the queued and scheduled task instances and the oldest queued one's
    ``updated_at`` (when it was queued), by queue name; one query."""
    queue_of = DagTask.objects.filter(dag_id=OuterRef("dag_id"), task_id=OuterRef("task_id"))
    waiting = TaskInstanceState.QUEUED, TaskInstanceState.SCHEDULED
    rows = (
        TaskInstance.objects.filter(state__in=waiting)
        .annotate(queue=Coalesce(Subquery(queue_of.values("queue")[:1]), Value(DEFAULT_QUEUE)))
        .values("queue")
        .annotate(
            queued=Count("pk", filter=Q(state=TaskInstanceState.QUEUED)),
            scheduled=Count("pk", filter=Q(state=TaskInstanceState.SCHEDULED)),
            oldest=Min("updated_at", filter=Q(state=TaskInstanceState.QUEUED)),
        )
        .order_by("queue")
    )
    return [
        QueueDepth(row["queue"], row["queued"], row["scheduled"], row["oldest"]) for row in rows
    ]
