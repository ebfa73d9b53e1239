"""Creating runs and admitting them (Airflow 3.3's ``max_active_runs``).

A new run is ``queued``. It becomes ``running`` (its ``start_date`` set) when it is
**admitted**: its DAG is not paused and has fewer ``running`` runs than its
``max_active_runs``, and no older run of it is still waiting. :func:`dag_runs_insert` admits
at creation when it can (the scheduler's runs, a triggered run), :func:`dag_runs_admit` later,
oldest first (every scheduler pass, after a clear or a mark); an admitted run's first task
instances are then decided (``advance``).
"""

from __future__ import annotations

import logging
import uuid
from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.models import Count, Exists, OuterRef, Q
from django.utils import timezone

from assets_app.models import Dag, DagRun, DagRunState, TaskInstance, TaskInstanceState
from assets_app.notify import RUNS_CHANNEL, notify
from assets_app.services.runs.advance import task_instances_advance
from assets_app.services.runs.plans import NO_PLAN, dags_task_ids, dags_task_plans
from assets_app.services.sql import Dialect, model_rows_insert

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class RunSpec:
    """A run to create (all datetimes aware)."""

    dag_id: str
    run_id: str
    run_type: str
    run_after: datetime
    logical_date: datetime | None = None
    data_interval_start: datetime | None = None
    data_interval_end: datetime | None = None
    conf: Mapping[str, Any] = field(default_factory=dict)
    partition_key: str | None = None
    triggered_by: str | None = None  # ``DagRunTriggeredBy``
    triggering_user_name: str | None = None


@dataclass(frozen=True)
class DagRoom:
    """What admitting a new run of a DAG reads of it (its row locked by the caller)."""

    is_paused: bool
    max_active_runs: int
    running: int  # its running runs
    queued: int  # its runs waiting to be admitted
    task_ids: list[Any]  # ``Dag.task_ids``

    def free_slots(self) -> int:
        """How many new runs may start now (none while older ones wait, or while paused)."""
        return 0 if self.is_paused or self.queued else self.max_active_runs - self.running


def dags_room(dag_ids: Collection[str]) -> dict[str, DagRoom]:
    """Each DAG's :class:`DagRoom` (1 query)."""
    return {
        dag_id: DagRoom(paused, cap, running, queued, declared)
        for dag_id, paused, cap, running, queued, declared in Dag.objects.filter(dag_id__in=dag_ids)
        .annotate(
            running=Count("runs", filter=Q(runs__state=DagRunState.RUNNING)),
            queued=Count("runs", filter=Q(runs__state=DagRunState.QUEUED)),
        )
        .values_list("dag_id", "is_paused", "max_active_runs", "running", "queued", "task_ids")
    }


@dataclass(frozen=True)
class CreatedRun:
    dag_id: str
    run_id: str
    dag_run_pk: int
    state: str  # running when admitted at creation, else queued
    task_ids: tuple[str, ...]


def dag_runs_insert(
    specs: Sequence[RunSpec],
    *,
    rooms: Mapping[str, DagRoom] | None = None,
    now: datetime | None = None,
) -> list[CreatedRun]:
    """Insert new runs with their task instances, admitting each that can run now.

    Call inside a transaction that holds the rows of the specs' DAGs locked (so the counts of
    running runs it admits against stay true until it commits); ``rooms`` if the caller has
    read them already (:func:`dags_room`). A run is admitted (``running``, ``start_date``
    now) when its DAG is unpaused and has fewer running runs than ``max_active_runs`` and no
    queued run waiting; its task instances without upstreams are then ``scheduled`` and the
    workers woken at commit; every other task instance starts without a state. Three
    statements whatever the number of runs (four without ``rooms``, five with the
    notification), in the order of ``specs``.
    """
    if not specs:
        return []
    now = now or timezone.now()
    dag_ids = list(dict.fromkeys(spec.dag_id for spec in specs))
    rooms = rooms if rooms is not None else dags_room(dag_ids)
    admitted: list[bool] = []
    slots: dict[str, int] = {}
    for spec in specs:
        free = slots.setdefault(spec.dag_id, rooms[spec.dag_id].free_slots())
        admitted.append(free > 0)
        slots[spec.dag_id] = free - 1
    sql = Dialect.current()
    json_dt = sql.json_datetime
    now_json = json_dt(now)
    inserted = {
        (dag_id, run_id): pk
        for pk, dag_id, run_id in model_rows_insert(
            DagRun,
            [
                {
                    "dag": spec.dag_id,
                    "run_id": spec.run_id,
                    "run_type": spec.run_type,
                    "run_after": json_dt(spec.run_after),
                    "logical_date": _json_or_none(sql, spec.logical_date),
                    "data_interval_start": _json_or_none(sql, spec.data_interval_start),
                    "data_interval_end": _json_or_none(sql, spec.data_interval_end),
                    "conf": dict(spec.conf),
                    "partition_key": spec.partition_key,
                    "triggered_by": spec.triggered_by,
                    "triggering_user_name": spec.triggering_user_name,
                    "state": (DagRunState.RUNNING if runs else DagRunState.QUEUED).value,
                    "start_date": now_json if runs else None,
                    "created_at": now_json,
                }
                for spec, runs in zip(specs, admitted, strict=True)
            ],
            returning=("id", "dag", "run_id"),  # RETURNING's order is not the rows'
        )
    }
    pks = [inserted[spec.dag_id, spec.run_id] for spec in specs]
    task_ids = dags_task_ids({dag_id: rooms[dag_id].task_ids for dag_id in dag_ids})
    plans = dags_task_plans(dag_ids)
    ti_pk = TaskInstance._meta.pk
    assert ti_pk is not None  # noqa: S101 - narrows the type for mypy
    db = connections[DEFAULT_DB_ALIAS]  # once: the proxy looks the connection up per use
    depended_on = {(dag_id, up) for (dag_id, _), plan in plans.items() for up in plan.upstream}
    instances: list[dict[str, Any]] = []
    to_expand: list[int] = []
    for spec, pk, runs in zip(specs, pks, admitted, strict=True):
        for task_id in task_ids[spec.dag_id]:
            plan = plans.get((spec.dag_id, task_id), NO_PLAN)
            if (
                runs
                and plan.mapped
                and not plan.upstream
                and (not to_expand or to_expand[-1] != pk)
            ):
                to_expand.append(pk)
            instances.append(
                {
                    "id": str(ti_pk.get_db_prep_value(uuid.uuid4(), db)),
                    "dag_run": pk,
                    "dag_id": spec.dag_id,
                    "run_id": spec.run_id,
                    "task_id": task_id,
                    "max_tries": plan.retries,
                    "has_downstream": (spec.dag_id, task_id) in depended_on,
                    "pool": plan.pool,
                    "pool_slots": plan.pool_slots,
                    "priority_weight": plan.priority_weight,
                    # one that depends on the past waits for advance to ask the past, a
                    # mapped one for advance to expand it
                    "state": TaskInstanceState.SCHEDULED.value
                    if runs and not plan.upstream and not plan.depends_on_past and not plan.mapped
                    else None,
                }
            )
    if instances:
        model_rows_insert(TaskInstance, instances)
    if to_expand:  # a mapped task without upstreams expands as soon as its run is committed
        transaction.on_commit(lambda: task_instances_advance(dag_run_ids=to_expand, now=now))
    if any(admitted):
        notify(RUNS_CHANNEL)  # workers wake up when this commits
    return [
        CreatedRun(
            dag_id=spec.dag_id,
            run_id=spec.run_id,
            dag_run_pk=pk,
            state=(DagRunState.RUNNING if runs else DagRunState.QUEUED).value,
            task_ids=tuple(task_ids[spec.dag_id]),
        )
        for spec, pk, runs in zip(specs, pks, admitted, strict=True)
    ]


def _json_or_none(sql: Dialect, value: datetime | None) -> Any:
    return None if value is None else sql.json_datetime(value)


def dag_runs_admit(
    *, dag_ids: Collection[str] | None = None, now: datetime | None = None
) -> list[int]:
    """Admit queued runs of unpaused DAGs that have room: ``queued`` → ``running``, oldest
    ``run_after`` first, up to ``max_active_runs`` running per DAG; their first task
    instances are then decided (:func:`task_instances_advance`). Returns the admitted runs.

    ``dag_ids``: only those DAGs (after a clear, say); else every DAG with a queued run. One
    transaction holding the DAGs' rows (``SKIP LOCKED``: a DAG another transaction is
    creating or admitting runs of is left for the next pass), five statements however many
    DAGs, then the advance.
    """
    now = now or timezone.now()
    queued_runs = DagRun.objects.filter(state=DagRunState.QUEUED)
    candidates = Dag.objects.filter(is_paused=False, is_stale=False).filter(
        Exists(queued_runs.filter(dag=OuterRef("pk")))
    )
    if dag_ids is not None:
        candidates = candidates.filter(dag_id__in=list(dag_ids))
    admitted: list[int] = []
    with transaction.atomic():
        caps = dict(
            candidates.select_for_update(skip_locked=True, no_key=True)
            .order_by()
            .values_list("dag_id", "max_active_runs")
        )
        if not caps:
            return []
        running: dict[str, int] = defaultdict(int)
        running.update(
            DagRun.objects.filter(dag_id__in=caps, state=DagRunState.RUNNING)
            .values("dag_id")
            .annotate(count=Count("pk"))
            .order_by()
            .values_list("dag_id", "count")
        )
        for pk, dag_id in (
            queued_runs.filter(dag_id__in=caps)
            .order_by("run_after", "pk")
            .values_list("pk", "dag_id")
        ):
            if running[dag_id] < caps[dag_id]:
                running[dag_id] += 1
                admitted.append(pk)
        if admitted:
            DagRun.objects.filter(pk__in=admitted, state=DagRunState.QUEUED).update(
                state=DagRunState.RUNNING, start_date=now, end_date=None
            )
    if admitted:
        logger.info("admitted %d queued run(s)", len(admitted))
        task_instances_advance(dag_run_ids=admitted, now=now)
    return admitted
