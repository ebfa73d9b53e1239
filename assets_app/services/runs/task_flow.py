"""How a DAG run moves through its tasks: its task instances' states follow the DAG's edges.

The rules (Airflow 3.3's, from ``airflow/models/dagrun.py`` and ``ti_deps``):

- **A new run** is ``queued``. It becomes ``running`` (its ``start_date`` set) when it is
  **admitted**: its DAG is not paused and has fewer ``running`` runs than its
  ``max_active_runs``, and no older run of it is still waiting (:func:`dag_runs_insert` admits
  at creation when it can, :func:`dag_runs_admit` later, oldest first).
- **Its task instances start without a state.** In a running run, one whose direct upstreams
  let its trigger rule hold becomes ``scheduled`` (for a worker to claim); one that can never
  run becomes ``upstream_failed`` or ``skipped`` (:mod:`assets_app.trigger_rules`), which in
  turn decides its own downstreams. A task without upstreams is ready at once.
- **The run settles** when none of its task instances is unfinished: ``failed`` if a leaf
  (a task no other depends on) is ``failed`` or ``upstream_failed``, else ``success``
  (:func:`dag_run_settle`).

Who moves things along:

- the finishing of a task instance (``task_instances._finish``): right after its commit,
  :func:`dag_run_progress` decides its run's waiting task instances (the **hand-over**: the
  next task is ``scheduled`` and the workers woken without waiting for a scheduler pass) and
  settles the run when nothing is left;
- every scheduler pass: :func:`dag_runs_admit` and :func:`task_instances_advance` over every
  running run with waiting task instances (a fixed number of statements however many), which
  also catches what a process that died between a commit and its hand-over left behind.

Why the hand-over runs after the commit, not inside it: two upstreams of one task finishing
at once each read the other as still running inside their own transactions, and neither
would schedule the task. Each decides after its own commit instead, so the later of the two
reads both finished (the same argument as :func:`dag_run_settle`'s), and the ``UPDATE … WHERE
state IS NULL`` makes the task instance change once however many decide it.
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connection, connections, transaction
from django.db.models import Count, Exists, OuterRef, Q
from django.utils import timezone

from assets_app.models import (
    FAILED_TI_STATES,
    FINISHED_TI_STATES,
    Dag,
    DagRun,
    DagRunState,
    DagTask,
    TaskInletAssetReference,
    TaskInstance,
    TaskInstanceState,
    TaskOutletAssetReference,
)
from assets_app.notify import RUNS_CHANNEL, notify
from assets_app.services.sql import (
    Dialect,
    Statement,
    column,
    column_values,
    model_rows_insert,
    of,
    statements_cursor,
    table,
)
from assets_app.trigger_rules import (
    DEFAULT_TRIGGER_RULE,
    Decision,
    UpstreamCounts,
    trigger_rule_evaluate,
)

logger = logging.getLogger(__name__)

FINISHED_RUN_STATES = (DagRunState.SUCCESS, DagRunState.FAILED)
#: The most runs ``dag_runs_settle_finished`` ends in one call (the rest wait for the next).
SETTLE_LIMIT = 500
#: The most running runs one scheduler pass advances (the rest wait for the next pass).
ADVANCE_LIMIT = 1000

_DECIDED_STATES = {
    Decision.READY: TaskInstanceState.SCHEDULED,
    Decision.SKIPPED: TaskInstanceState.SKIPPED,
    Decision.UPSTREAM_FAILED: TaskInstanceState.UPSTREAM_FAILED,
}


# --- the shape of a DAG's tasks -----------------------------------------------------------


@dataclass(frozen=True)
class TaskPlan:
    """What a task instance's scheduling reads of its declared task."""

    retries: int = 0
    upstream: tuple[str, ...] = ()
    trigger_rule: str = DEFAULT_TRIGGER_RULE.value


def dags_task_plans(dag_ids: Collection[str]) -> dict[tuple[str, str], TaskPlan]:
    """``(dag_id, task_id)`` → its declared :class:`TaskPlan` (1 statement, none without
    DAGs; prepared: the scheduler reads it per batch); a task no manifest declares has none
    (the defaults: no retries, no upstreams)."""
    if not dag_ids:
        return {}
    sql = Dialect.current()
    t = of("t", DagTask)
    among, ids = sql.among(t("dag"), dag_ids, type="text")
    with statements_cursor() as cursor:
        sql.execute(
            cursor,
            f"""
            SELECT {t("dag")}, {t("task_id")}, {t("retries")}, {t("upstream")},
                {t("trigger_rule")}
            FROM {table(DagTask)} t WHERE {among}
            """,  # noqa: S608 - names from the models, values bound as parameters
            [ids],
        )
        rows = cursor.fetchall()
    # JSON converted as the ORM reads the column
    upstreams = column_values(DagTask, "upstream", [row[3] for row in rows])
    return {
        (dag_id, task_id): TaskPlan(
            retries=retries, upstream=tuple(upstream or ()), trigger_rule=trigger_rule
        )
        for (dag_id, task_id, retries, _, trigger_rule), upstream in zip(
            rows, upstreams, strict=True
        )
    }


def dags_task_ids(declared: Mapping[str, list[Any]]) -> dict[str, list[str]]:
    """The task instances a new run of each DAG gets: its declared tasks (``declared``: its
    ``Dag.task_ids``), or, without a declared list, the tasks its asset references name (0
    queries if every DAG declares its tasks, else 2)."""
    task_ids = {
        dag_id: list(dict.fromkeys(str(task_id) for task_id in tasks))
        for dag_id, tasks in declared.items()
        if tasks
    }
    undeclared = [dag_id for dag_id, tasks in declared.items() if not tasks]
    if undeclared:
        found: dict[str, set[str]] = {dag_id: set() for dag_id in undeclared}
        for model in (TaskOutletAssetReference, TaskInletAssetReference):
            for dag_id, task_id in model.objects.filter(dag_id__in=undeclared).values_list(
                "dag_id", "task_id"
            ):
                found[dag_id].add(task_id)
        task_ids.update((dag_id, sorted(tasks)) for dag_id, tasks in found.items())
    return task_ids


# --- creating runs --------------------------------------------------------------------------


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
    for spec, pk, runs in zip(specs, pks, admitted, strict=True):
        for task_id in task_ids[spec.dag_id]:
            plan = plans.get((spec.dag_id, task_id), _NO_PLAN)
            instances.append(
                {
                    "id": str(ti_pk.get_db_prep_value(uuid.uuid4(), db)),
                    "dag_run": pk,
                    "dag_id": spec.dag_id,
                    "run_id": spec.run_id,
                    "task_id": task_id,
                    "max_tries": plan.retries,
                    "has_downstream": (spec.dag_id, task_id) in depended_on,
                    "state": TaskInstanceState.SCHEDULED.value
                    if runs and not plan.upstream
                    else None,
                }
            )
    if instances:
        model_rows_insert(TaskInstance, instances)
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


_NO_PLAN = TaskPlan()


def _json_or_none(sql: Dialect, value: datetime | None) -> Any:
    return None if value is None else sql.json_datetime(value)


# --- a run's state ------------------------------------------------------------------------


def dag_run_start(dag_run: DagRun, *, start_date: datetime) -> None:
    """A task instance of the run started: a ``queued`` run becomes ``running``.

    Call in the transaction that starts the task instance. No statement when the run is not
    ``queued``; two first task instances starting at once move it once (the ``UPDATE``
    re-checks the state).
    """
    if dag_run.state != DagRunState.QUEUED:
        return
    DagRun.objects.filter(pk=dag_run.pk, state=DagRunState.QUEUED).update(
        state=DagRunState.RUNNING, start_date=start_date, end_date=None
    )
    dag_run.state, dag_run.start_date, dag_run.end_date = DagRunState.RUNNING, start_date, None


def dag_run_settle(*, dag_run_id: int, end_date: datetime | None = None) -> bool:
    """End a ``running`` run if none of its task instances is unfinished; ``True`` if it ended
    now: ``failed`` if a leaf's task instance (of a task no other depends on, or of no
    declared task) is ``failed`` or ``upstream_failed``, else ``success`` (Airflow's
    ``update_state``).

    ``end_date`` defaults to now (as Airflow's ``DagRun.set_state``: the server's clock, not a
    runner's).

    Call **after** the transaction that finished a task instance has committed, outside any
    transaction: the statement then reads every task instance as committed when it starts.
    Of two last task instances finishing at once, the settle that starts later sees both
    finished (each starts after its own commit), and the ``UPDATE`` re-checks the run's state
    on the row it waited for, so the run ends once. Only a ``running`` run settles: clearing
    puts the run of a cleared task instance back to ``queued`` in the transaction that holds
    its lock, so a settle that read the task instances before a clear committed finds the run
    no longer ``running`` and does nothing. One fixed ``UPDATE`` statement (raw SQL: the ORM
    spent more time building it than PostgreSQL spends running it, on every finished task
    instance).
    """
    statement = _settle(
        runs=f"%s AND {column(DagRun, 'state')} = %s",
        runs_params=[dag_run_id, DagRunState.RUNNING.value],
        task_instances=_run_task_instances(),
        task_instances_params=[dag_run_id],
        end_date=end_date or timezone.now(),
    )
    with statements_cursor() as cursor:
        cursor.execute(statement.text, statement.params)
        settled = cursor.rowcount
    if settled:
        dag_run_ended(dag_run_id)
    return bool(settled)


def dag_run_ended(dag_run_id: int) -> None:
    """Say that a settle ended the run (this one or :func:`dag_run_settle_step`)."""
    logger.info("DAG run %s finished", dag_run_id)


def dag_run_settle_step(*, finished: str, end_date: datetime) -> Statement:
    """:func:`dag_run_settle` as a step of the PostgreSQL statement that finishes a task
    instance: ``finished`` names the step returning it as it is now (``id``, ``dag_run_id``,
    ``dag_id``, ``task_id``, ``state``, ``has_downstream``); the step returns the id of the
    run it ended.

    The statement's snapshot still sees that task instance unfinished, so its new state comes
    from ``finished`` and the others from the table. The run ends here only if the task has
    no downstreams (else the hand-over decides the rest), every other task instance of the
    run is finished, and no other transaction holds the run's row (``SKIP LOCKED``: a clear
    holding the run and waiting for this task instance would deadlock with it). Otherwise
    nothing happens, and the caller settles after the commit (:func:`dag_run_settle`), as the
    concurrency argument there needs.
    """
    run_id, run_state = column(DagRun, "id"), column(DagRun, "state")
    f, ti = of("f", TaskInstance), of("ti", TaskInstance)
    return _settle(
        runs=f"""(
            SELECT r.{run_id} FROM {table(DagRun)} r, {finished} f
            WHERE r.{run_id} = {f("dag_run")} AND NOT {f("has_downstream")}
            AND r.{run_state} = %s
            FOR UPDATE OF r SKIP LOCKED
        )""",  # noqa: S608 - names from the models, values bound as parameters
        runs_params=[DagRunState.RUNNING.value],
        task_instances=" ".join(
            f"""
            SELECT {f("state")} AS state, {f("dag_id")} AS dag_id, {f("task_id")} AS task_id
            FROM {finished} f
            UNION ALL
            SELECT {ti("state")}, {ti("dag_id")}, {ti("task_id")}
            FROM {table(TaskInstance)} ti, {finished} f
            WHERE {ti("dag_run")} = {f("dag_run")} AND {ti("id")} <> {f("id")}
            """.split()  # noqa: S608 - names from the models, values bound as parameters
        ),
        task_instances_params=[],
        end_date=end_date,
        returning=f" RETURNING {run_id}",
    )


def dag_runs_settle_finished(*, end_date: datetime | None = None) -> int:
    """Settle every ``running`` run none of whose task instances is unfinished: the runs a
    process that died between a task instance's commit and its run's settle left behind (the
    runner's retried report settles them too). ``upkeep`` calls it; returns how many ended."""
    unfinished = TaskInstance.objects.filter(dag_run=OuterRef("pk")).exclude(
        state__in=FINISHED_TI_STATES
    )
    stuck = DagRun.objects.filter(state=DagRunState.RUNNING).exclude(Exists(unfinished))
    return sum(
        dag_run_settle(dag_run_id=pk, end_date=end_date)
        for pk in stuck.values_list("pk", flat=True)[:SETTLE_LIMIT]
    )


@functools.cache
def _run_task_instances() -> str:
    """The task instances of the run given as the one parameter, as :func:`_settle` reads
    them."""
    ti = of(table(TaskInstance), TaskInstance)
    return (
        f"SELECT {ti('state')} AS state, {ti('dag_id')} AS dag_id, {ti('task_id')} AS task_id "  # noqa: S608 - names from the models, values bound as parameters
        f"FROM {table(TaskInstance)} WHERE {ti('dag_run')} = %s"
    )


def _settle(
    *,
    runs: str,
    runs_params: Sequence[Any],
    task_instances: str,
    task_instances_params: Sequence[Any],
    end_date: datetime,
    returning: str = "",
) -> Statement:
    """The settle ``UPDATE``, written once: the run ``runs`` selects ends if none of the task
    instances ``task_instances`` selects (``state``, ``dag_id``, ``task_id``) is unfinished;
    ``failed`` if one of a leaf (of a task no other depends on, or of no declared task) is
    ``failed`` or ``upstream_failed``, else ``success``."""
    failed = sorted(state.value for state in FAILED_TI_STATES)
    finished = sorted(state.value for state in FINISHED_TI_STATES)
    return Statement(
        _settle_sql(runs, task_instances, len(failed), len(finished)) + returning,
        [
            *task_instances_params,
            *failed,
            False,  # a task instance of a task that others depend on is no leaf
            DagRunState.FAILED.value,
            DagRunState.SUCCESS.value,
            connection.ops.adapt_datetimefield_value(end_date),
            *runs_params,
            *task_instances_params,
            *finished,
        ],
    )


@functools.cache
def _settle_sql(runs: str, task_instances: str, failed: int, finished: int) -> str:
    run_id, run_state, run_end = (column(DagRun, f) for f in ("id", "state", "end_date"))
    t_dag, t_task, t_leaf = (column(DagTask, f) for f in ("dag", "task_id", "is_leaf"))

    def placeholders(count: int) -> str:
        return ", ".join(["%s"] * count)

    return " ".join(
        f"""
        UPDATE {table(DagRun)} SET
            {run_state} = CASE WHEN EXISTS (
                SELECT 1 FROM ({task_instances}) ti
                WHERE ti.state IN ({placeholders(failed)})
                AND NOT EXISTS (
                    SELECT 1 FROM {table(DagTask)} t WHERE t.{t_dag} = ti.dag_id
                    AND t.{t_task} = ti.task_id AND t.{t_leaf} = %s
                )
            ) THEN %s ELSE %s END,
            {run_end} = %s
        WHERE {run_id} = {runs}
        AND NOT EXISTS (
            SELECT 1 FROM ({task_instances}) ti
            WHERE ti.state IS NULL OR ti.state NOT IN ({placeholders(finished)})
        )
        """.split()  # noqa: S608 - names from the models, values bound as parameters
    )


# --- deciding the waiting task instances --------------------------------------------------


@dataclass
class AdvanceResult:
    """What :func:`task_instances_advance` changed."""

    scheduled: int = 0
    skipped: int = 0
    upstream_failed: int = 0
    runs_settled: int = 0


def dag_run_progress(
    *, dag_run_id: int, has_downstream: bool, end_date: datetime | None = None
) -> None:
    """After a task instance of the run finished (its transaction committed): decide the
    run's waiting task instances if the task has downstreams (the hand-over), and settle the
    run when nothing is left to do. A leaf's finish changes no other task instance's
    decision: then only the settle (one statement)."""
    if has_downstream:
        task_instances_advance(dag_run_ids=[dag_run_id], now=end_date)
    else:
        dag_run_settle(dag_run_id=dag_run_id, end_date=end_date)


def task_instances_advance(
    *,
    dag_run_ids: Collection[int] | None = None,
    changed_since: datetime | None = None,
    now: datetime | None = None,
) -> AdvanceResult:
    """Decide the state-less task instances of running runs by their trigger rules; settle the
    runs left with nothing unfinished; wake the workers if any became ``scheduled``.

    ``dag_run_ids``: only those runs (the hand-over); else every running run with a waiting
    task instance (a scheduler pass, up to ``ADVANCE_LIMIT`` runs) — with ``changed_since``,
    only those where a task instance changed since then (a long-running scheduler's passes
    between its full ones: a run whose upstreams are still running costs them nothing).
    Call outside a transaction, after the commits that changed the upstreams (see the module
    docstring).
    Set-based: two queries, at most one ``UPDATE`` per new state, one notification, and one
    settle per run that ended — however many runs.
    """
    now = now or timezone.now()
    running = DagRun.objects.filter(state=DagRunState.RUNNING)
    if dag_run_ids is not None:
        runs = running.filter(pk__in=list(dag_run_ids))
    else:
        waiting = TaskInstance.objects.filter(dag_run=OuterRef("pk"), state__isnull=True)
        runs = running.filter(Exists(waiting))
        if changed_since is not None:
            changed = TaskInstance.objects.filter(
                dag_run=OuterRef("pk"), updated_at__gte=changed_since
            )
            runs = runs.filter(Exists(changed))
        runs = runs.order_by("run_after", "pk")[:ADVANCE_LIMIT]
    rows = list(
        TaskInstance.objects.filter(dag_run__in=runs.values("pk")).values_list(
            "pk", "dag_run_id", "dag_id", "task_id", "state"
        )
    )
    if not rows:
        return AdvanceResult()
    decided, finished_runs = _decisions(rows)
    result = _decisions_write(decided, now=now)
    if result.scheduled:
        notify(RUNS_CHANNEL)  # delivered at once outside a transaction (at commit inside one)
    for run_pk in finished_runs:
        result.runs_settled += dag_run_settle(dag_run_id=run_pk, end_date=now)
    return result


def _decisions(
    rows: Sequence[tuple[uuid.UUID, int, str, str, str | None]],
) -> tuple[dict[str, list[uuid.UUID]], list[int]]:
    """The task instances (``(pk, run pk, dag id, task id, state)``, every one of each run)
    decided, by new state, and the runs with nothing unfinished after (1 query)."""
    plans = dags_task_plans({dag_id for _, _, dag_id, _, _ in rows})
    by_run: dict[int, list[_Waiting]] = defaultdict(list)
    for pk, run_pk, dag_id, task_id, state in rows:
        by_run[run_pk].append(_Waiting(pk, task_id, state, plans.get((dag_id, task_id), _NO_PLAN)))
    decided: dict[str, list[uuid.UUID]] = defaultdict(list)
    finished_runs: list[int] = []
    for run_pk, instances in by_run.items():
        for instance in _decide(instances):
            decided[str(instance.state)].append(instance.pk)
        if all(instance.state in FINISHED_TI_STATES for instance in instances):
            finished_runs.append(run_pk)
    return decided, finished_runs


def _decisions_write(decided: Mapping[str, list[uuid.UUID]], *, now: datetime) -> AdvanceResult:
    """One ``UPDATE`` per new state, each only where the task instance is still state-less
    (another process that decided it first wins; nothing is counted twice)."""
    result = AdvanceResult()
    for state, pks in decided.items():
        changes: dict[str, Any] = {"state": state, "updated_at": now}
        if state != TaskInstanceState.SCHEDULED:
            changes |= {"start_date": now, "end_date": now, "duration": 0.0}
        count = TaskInstance.objects.filter(pk__in=pks, state__isnull=True).update(**changes)
        if state == TaskInstanceState.SCHEDULED:
            result.scheduled += count
        elif state == TaskInstanceState.SKIPPED:
            result.skipped += count
        else:
            result.upstream_failed += count
    return result


@dataclass
class _Waiting:
    pk: uuid.UUID
    task_id: str
    state: str | None
    plan: TaskPlan


def _decide(instances: list[_Waiting]) -> Iterable[_Waiting]:
    """Decide a run's state-less task instances, in memory, until nothing changes (a skip or
    an upstream failure decides the task instances after it in the same pass); yields each
    one decided, with its new state."""
    by_task = {instance.task_id: instance for instance in instances}
    changed = True
    while changed:
        changed = False
        for instance in instances:
            if instance.state is not None:
                continue
            decision = trigger_rule_evaluate(
                rule=instance.plan.trigger_rule, counts=_upstream_counts(instance, by_task)
            )
            if decision is Decision.WAIT:
                continue
            instance.state = _DECIDED_STATES[decision].value
            changed = changed or decision is not Decision.READY
            yield instance


def _upstream_counts(instance: _Waiting, by_task: Mapping[str, _Waiting]) -> UpstreamCounts:
    """Its direct upstreams' states; an upstream with no task instance in the run (a task
    added since) counts as ``removed``, as Airflow counts it."""
    counts: dict[str, int] = defaultdict(int)
    for task_id in instance.plan.upstream:
        upstream = by_task.get(task_id)
        state = TaskInstanceState.REMOVED.value if upstream is None else upstream.state
        if state in _COUNTED:
            counts[str(state)] += 1
    return UpstreamCounts(upstream=len(instance.plan.upstream), **counts)


_COUNTED = frozenset(
    state.value
    for state in (
        TaskInstanceState.SUCCESS,
        TaskInstanceState.SKIPPED,
        TaskInstanceState.FAILED,
        TaskInstanceState.UPSTREAM_FAILED,
        TaskInstanceState.REMOVED,
    )
)


# --- admitting queued runs ----------------------------------------------------------------


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
