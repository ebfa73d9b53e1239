"""The asset scheduler: turns ``asset_dag_run_queue`` rows into asset-triggered DAG runs.

One pass (:func:`scheduler_pass`) first decides, without locks, which unpaused, non-stale
DAGs have queue rows that meet their condition (like Airflow's ``dags_needing_dagruns``); a
long-running scheduler keeps a :class:`QueueWatch` so that a pass reads only the DAGs that got
new queue rows (plus a periodic full rescan), and costs in proportion to the new work, not to
the DAGs waiting. The ready DAGs are then handled in **batches** of up to ``BATCH_SIZE``, each
in its own transaction (:func:`dags_asset_triggered_runs_create`, a constant number of
set-based statements per batch), which re-checks everything under locks, DAG by DAG as below:

1. Lock the DAG row (``FOR NO KEY UPDATE SKIP LOCKED``): the per-DAG mutex. A batch is
   **claimed**: the next ``BATCH_SIZE`` DAGs of the pass's ready list (oldest-waiting first)
   whose rows no other transaction holds and that still have queue rows, in one statement
   (``ORDER BY … LIMIT … SKIP LOCKED``). So schedulers that found the same DAGs ready split
   them into disjoint full batches, and none spends a transaction on DAGs another one holds
   or has just served; those are evaluated again next pass. ``NO KEY`` so that producers'
   foreign-key checks on the DAG (``FOR KEY SHARE``) never wait for us. Paused or stale
   DAGs are left alone (their queue rows wait).
2. Lock the DAG's queue rows (``FOR UPDATE SKIP LOCKED``: a row a producer is still upserting
   stays for the next pass) and evaluate ``Dag.asset_expression``
   (:mod:`assets_app.conditions`) with "the asset has a locked queue row" as the leaf test.
   Not met → nothing changes; the rows wait.
3. Met → pick the events to consume **by id**: events on the assets the condition names
   directly or by ref, and events emitted *through* one of its aliases (as Airflow does: an
   alias consumer does not consume direct events on the alias's assets), not partitioned,
   that **no earlier run of this DAG consumed** (with no upper time bound: an event stamped by
   a producer whose clock runs ahead of ours is committed, and its queue row is deleted here,
   so it must be consumed now). So an event is never
   consumed twice by one DAG, and an event that committed after an earlier run's scan (its
   timestamp older than that run) is consumed by the next run instead of being skipped as a
   timestamp window would. The scan starts ``EVENT_LOOKBACK`` before the previous
   asset-triggered run was created; a DAG's first run has no lower bound (like Airflow, it
   consumes the history).
4. Create the ``DagRun`` (``asset_triggered``, state ``queued``, ``logical_date`` and data
   interval null, ``run_after`` = newest queue row's ``created_at``, run id
   ``asset_triggered__<run_after ISO>_<8 random chars>`` — as Airflow 3), its
   ``dagrun_asset_event`` rows, one ``scheduled`` task instance per declared task
   (``Dag.task_ids``; else the task ids of its inlet/outlet references; ``max_tries`` = the
   task's ``retries``) for a worker to claim, and delete the locked queue rows. On
   PostgreSQL the transaction notifies the workers (:data:`assets_app.notify.RUNS_CHANNEL`,
   delivered at commit). If every event was already consumed (a queue row re-added by a
   producer whose event the previous run took), the rows are deleted and no run is created:
   never two runs
   for one set of events.

Why no event is left behind without locking producers out: producers queue consumers with an
upsert (``INSERT … ON CONFLICT (asset_id, target_dag_id) DO UPDATE``, see
:func:`assets_app.services.assets.consumption.consumers_queue`) in the transaction that
inserts their events, which locks the queue row until they commit. So, for a queue row of
this DAG:

* a producer upserted it first (not committed yet): step 2 skips it and the row survives
  this transaction, so the producer's event is consumed by this run if it commits before
  step 3's scan, else by the next pass;
* we locked it first: the producer's upsert **waits** for us. Its event is not committed, so
  step 3 cannot see it and this run does not consume it. When we commit having deleted the
  row, the upsert finds no conflict any more and inserts a fresh row (with the producer's
  ``created_at``), which the next pass picks up; if we kept the row (condition not met) the
  upsert updates it;
* a producer that committed before step 2 is fully visible to step 3.

Events are consumed by id (step 3), so an event visible to two passes is consumed once. The
scheduler itself never waits for a producer (``SKIP LOCKED``, ``NO KEY``), so the two cannot
deadlock. With ``ON CONFLICT DO NOTHING`` instead, a producer meeting our locked row would
have done nothing without waiting, and its event would have had no queue row once we deleted
ours.

All of this holds DAG by DAG inside a batch: every lock is taken with ``SKIP LOCKED`` (the
scheduler never waits, whatever the batch), and a DAG whose rows a producer holds is simply
not ready in this batch (the watch looks at it again next pass).

On SQLite ``select_for_update`` is a no-op; the ``IMMEDIATE`` transactions
(settings) make each DAG's transaction exclusive, which gives the same guarantees.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import DatabaseError, transaction

from assets_app.conditions import Condition, condition_is_met
from assets_app.exceptions import InvalidAssetExpression
from assets_app.models import (
    AssetDagRunQueue,
    Dag,
    DagRun,
    DagRunAssetEvent,
    DagRunState,
    DagRunTriggeredBy,
    DagRunType,
)
from assets_app.services.assets.consumption import (
    condition_of,
    condition_resolve,
    references_of,
    unconsumed_event_ids,
)
from assets_app.services.runs.admit import DagRoom, RunSpec, dag_runs_insert
from assets_app.services.scheduling.queue_watch import QueuedDag, QueueWatch, queued_dags
from assets_app.services.sql import (
    Dialect,
    column,
    column_values,
    model_rows_insert,
    of,
    statements_cursor,
    table,
)

logger = logging.getLogger(__name__)

#: DAGs handled in one transaction. Bounds the transaction, and so how long a producer may
#: wait for a queue row the scheduler holds.
BATCH_SIZE = 100

#: A claim looks at up to this many batches' worth of the ready list: room for the batch
#: another scheduler holds meanwhile (what more schedulers hold is passed over, and looked at
#: again next pass), without checking many more DAGs than it takes.
CLAIM_WINDOW = 2


class Outcome(enum.StrEnum):
    """What one DAG's transaction did."""

    CREATED = "created"  # a run was created
    NOT_READY = "not_ready"  # condition not met (or no queue rows left); rows wait
    LOCKED = "locked"  # another scheduler holds the DAG this pass
    INACTIVE = "inactive"  # paused or stale (or gone); rows wait
    NOTHING_TO_CONSUME = "nothing_to_consume"  # met, but every event was already consumed
    CAPPED = "capped"  # max_active_runs reached: rows wait for a slot (retried every pass)
    DROPPED = "dropped"  # the DAG is no longer asset-scheduled; its rows were deleted
    INVALID = "invalid"  # asset_expression unreadable; rows wait, error logged
    FAILED = "failed"  # database error; rolled back, retried next pass


@dataclass(frozen=True)
class AssetTriggeredRun:
    """A DAG run the scheduler created."""

    dag_id: str
    run_id: str
    dag_run_pk: int
    run_after: datetime
    event_ids: tuple[int, ...]
    task_ids: tuple[str, ...]


@dataclass(frozen=True)
class DagOutcome:
    dag_id: str
    outcome: Outcome
    #: the runs created (several for a ``one_run_per_event`` DAG)
    runs: tuple[AssetTriggeredRun, ...] = ()
    #: events are left for later runs (``one_run_per_event`` with fewer slots than events)
    more: bool = False


@dataclass
class SchedulerPassResult:
    """Everything one pass did, DAG by DAG."""

    outcomes: list[DagOutcome] = field(default_factory=list)

    @property
    def created(self) -> list[AssetTriggeredRun]:
        return [run for o in self.outcomes for run in o.runs]

    def count(self, outcome: Outcome) -> int:
        return sum(1 for o in self.outcomes if o.outcome is outcome)


def scheduler_pass(
    *,
    max_dags: int | None = None,
    watch: QueueWatch | None = None,
    batch_size: int = BATCH_SIZE,
) -> SchedulerPassResult:
    """One scheduling pass: find the DAGs whose condition is met, create their runs.

    First, without locks, decide which unpaused, non-stale DAGs have queue rows that meet their
    condition (as Airflow's ``dags_needing_dagruns`` does): with a :class:`QueueWatch` only the
    DAGs that got new queue rows since it last looked (plus those it was asked to retry), else
    every DAG with queue rows. Then create their runs, oldest-waiting first, in transactions
    that each **claim** up to ``batch_size`` of them (:func:`dags_asset_triggered_runs_create`
    with a ``limit``, which re-checks everything under locks): the next ready DAGs that no
    other transaction holds and that still have queue rows. So several schedulers walking the
    same ready list split it into disjoint batches, each of up to ``batch_size`` DAGs, instead
    of reaching batches another one holds or has already served. The DAGs a claim passed over
    (held by another scheduler, or served by one) are evaluated again next pass. A database
    error in one transaction is logged and the pass goes on; its DAGs are retried next pass.
    """
    result = SchedulerPassResult()
    queued = watch.scan() if watch is not None else queued_dags()
    try:
        ready = _ready_dag_ids(queued, result=result)
    except BaseException:
        if watch is not None:
            watch.forget()  # the rows it just saw were not evaluated
        raise
    # capped: looked at again each pass (in the watch's one read), until a slot frees
    retry: list[str] = [o.dag_id for o in result.outcomes if o.outcome is Outcome.CAPPED]
    if max_dags is not None:
        retry += ready[max_dags:]
        ready = ready[:max_dags]
    while ready:
        window = ready[: batch_size * CLAIM_WINDOW]
        try:
            outcomes = dags_asset_triggered_runs_create(dag_ids=window, limit=batch_size)
        except DatabaseError:
            logger.exception("scheduling DAGs %s … failed; retrying next pass", window[0])
            outcomes = [DagOutcome(dag_id=dag_id, outcome=Outcome.FAILED) for dag_id in window]
        result.outcomes += outcomes
        # Met when the pass looked, but not under lock: look again next pass even if no new
        # queue row arrives (e.g. a producer held one of its rows: it keeps its id).
        retry += [o.dag_id for o in outcomes if o.outcome in _RETRIED or o.more]
        # Claimed in the window's order: the DAGs before the last one claimed that were not
        # claimed are another transaction's (or served); a short claim exhausted the window.
        claimed = {o.dag_id for o in outcomes}
        reached = len(window)
        if len(outcomes) == batch_size and outcomes[-1].outcome is not Outcome.FAILED:
            reached = window.index(outcomes[-1].dag_id) + 1
        retry += [dag_id for dag_id in window[:reached] if dag_id not in claimed]
        ready = ready[reached:]
    if watch is not None:
        watch.retry(retry)
    return result


_RETRIED = frozenset({Outcome.LOCKED, Outcome.FAILED, Outcome.NOT_READY, Outcome.CAPPED})


def _ready_dag_ids(queued: Sequence[QueuedDag], *, result: SchedulerPassResult) -> list[str]:
    """The DAGs of ``queued`` worth a transaction, in the same order (0-3 queries, no locks).

    DAGs whose condition is not met (or unreadable) are recorded in ``result`` and left out.
    """
    conditions: dict[str, Condition] = {}
    for dag in queued:
        if dag.expression is None:
            continue  # ready: its rows are dropped under lock
        if dag.capped:
            continue  # left out below: no transaction until one of its runs ends
        try:
            conditions[dag.dag_id] = condition_of(dag.dag_id, dag.expression)
        except InvalidAssetExpression as exc:
            logger.error("DAG %s has an invalid asset_expression: %s", dag.dag_id, exc)
            result.outcomes.append(DagOutcome(dag_id=dag.dag_id, outcome=Outcome.INVALID))
    resolution = condition_resolve(references_of(conditions))
    ready: list[str] = []
    for dag in queued:
        condition = conditions.get(dag.dag_id)
        if dag.capped and dag.expression is not None:
            result.outcomes.append(DagOutcome(dag_id=dag.dag_id, outcome=Outcome.CAPPED))
        elif condition is None:
            if dag.expression is None:
                ready.append(dag.dag_id)
        elif condition_is_met(condition, resolution=resolution, ready_asset_ids=dag.asset_ids):
            ready.append(dag.dag_id)
        else:
            result.outcomes.append(DagOutcome(dag_id=dag.dag_id, outcome=Outcome.NOT_READY))
    return ready


def dag_asset_triggered_run_create(*, dag_id: str) -> DagOutcome:
    """:func:`dags_asset_triggered_runs_create` for one DAG."""
    (outcome,) = dags_asset_triggered_runs_create(dag_ids=[dag_id])
    return outcome


def dags_asset_triggered_runs_create(
    *, dag_ids: Sequence[str], limit: int | None = None
) -> list[DagOutcome]:
    """Create one asset-triggered run of each of ``dag_ids`` whose condition is met.

    One transaction for them all, a constant number of statements whatever their number
    (steps 1-4 of the module docstring, each set-based). Takes its own locks (DAG rows, then
    their queue rows, both without waiting); the caller must hold none and must not be inside
    a transaction. Returns one outcome per DAG, in the order given.

    With a ``limit``, it **claims** DAGs instead: it handles only the first ``limit`` of
    ``dag_ids``, in the order given, that no other transaction holds and that still have queue
    rows, and returns their outcomes only (in the order given). The others are none of its
    business: another scheduler is on them, or served them already.
    """
    batch = _Batch()
    with transaction.atomic(durable=True):
        locked = {dag.dag_id: dag for dag in _dags_lock(dag_ids, limit=limit)}
        if limit is not None:
            dag_ids = [dag_id for dag_id in dag_ids if dag_id in locked]
        active: dict[str, _LockedDag] = {}
        for dag_id in dag_ids:
            dag = locked.get(dag_id)
            if dag is None:
                batch.settle(dag_id, Outcome.LOCKED)
            elif dag.is_paused or dag.is_stale:
                batch.settle(dag_id, Outcome.INACTIVE)
            elif dag.active_runs >= dag.max_active_runs:
                batch.settle(dag_id, Outcome.CAPPED)  # created as soon as a run ends
            else:
                active[dag_id] = dag
        queued = _queue_rows_lock(active)
        conditions = _conditions_of(active, queued, batch=batch)
        resolution = condition_resolve(references_of(conditions))
        met: dict[str, Condition] = {}
        for dag_id, condition in conditions.items():
            ready_asset_ids = queued[dag_id].asset_ids
            if condition_is_met(condition, resolution=resolution, ready_asset_ids=ready_asset_ids):
                met[dag_id] = condition
            else:
                batch.settle(dag_id, Outcome.NOT_READY)

        consumed = unconsumed_event_ids(
            conditions=met,
            resolution=resolution,
            previous={dag_id: active[dag_id].latest_run_created_at for dag_id in met},
        )
        runs, more = _runs_plan(met, consumed, queued=queued, active=active, batch=batch)
        if runs:
            _runs_insert(
                runs,
                rooms={dag_id: dag.room for dag_id, dag in active.items()},
                settle=batch.settle,
                more=more,
            )
        _queue_rows_delete(batch.delete_pks)
    return [batch.outcomes[dag_id] for dag_id in dag_ids]


@dataclass
class _QueueRows:
    """A DAG's locked queue rows."""

    pks: list[int] = field(default_factory=list)
    asset_ids: set[int] = field(default_factory=set)
    #: the newest row's ``created_at``: the run's ``run_after``
    newest: datetime | None = None


@dataclass
class _Batch:
    """What one batch transaction decided so far: each DAG's outcome, and the queue rows to
    delete at its end."""

    outcomes: dict[str, DagOutcome] = field(default_factory=dict)
    delete_pks: list[int] = field(default_factory=list)

    def settle(
        self,
        dag_id: str,
        outcome: Outcome,
        runs: tuple[AssetTriggeredRun, ...] = (),
        *,
        more: bool = False,
    ) -> None:
        self.outcomes[dag_id] = DagOutcome(dag_id=dag_id, outcome=outcome, runs=runs, more=more)


def _queue_rows_lock(active: Mapping[str, _LockedDag]) -> dict[str, _QueueRows]:
    """Lock the queue rows of the ``active`` DAGs that no producer holds (``FOR UPDATE SKIP
    LOCKED``: 1 statement, none without DAGs), by DAG. Only each DAG's newest ``created_at``
    is read (a datetime read is a Python conversion per value)."""
    queued: dict[str, _QueueRows] = {}
    if not active:
        return queued
    sql = Dialect.current()
    q = of("q", AssetDagRunQueue)
    # planned per call, and a probe of the target_dag index per DAG (see statements_cursor)
    probed = sql.probe_join(
        table(AssetDagRunQueue), "q", f"{q('target_dag')} = r.dag_id", lock="FOR UPDATE SKIP LOCKED"
    )
    with statements_cursor(prepare=False) as cursor:
        sql.execute(
            cursor,
            f"""
            WITH locked AS (
                SELECT {q("id")} AS id, {q("target_dag")} AS dag_id, {q("asset")} AS asset_id,
                    {q("created_at")} AS created_at
                FROM {sql.rows(dag_id="text")} {probed}
            )
            SELECT id, dag_id, asset_id, CASE WHEN row_number() OVER (
                PARTITION BY dag_id ORDER BY created_at DESC) = 1 THEN created_at END
            FROM locked
            """,  # noqa: S608 - names from the models, values bound as parameters
            [sql.json({"dag_id": dag_id} for dag_id in active)],
        )
        newest: dict[str, Any] = {}
        for pk, dag_id, asset_id, created_at in cursor.fetchall():
            rows = queued.get(dag_id)
            if rows is None:
                rows = queued[dag_id] = _QueueRows()
            rows.pks.append(pk)
            rows.asset_ids.add(asset_id)
            if created_at is not None:
                newest[dag_id] = created_at
    # converted as the ORM reads the column
    for dag_id, created_at in zip(
        newest, column_values(AssetDagRunQueue, "created_at", newest.values()), strict=True
    ):
        queued[dag_id].newest = created_at
    return queued


def _queue_rows_delete(pks: Collection[int]) -> None:
    """Delete the locked queue rows ``pks`` (1 statement, none without rows)."""
    if not pks:
        return
    sql = Dialect.current()
    among, ids = sql.among(column(AssetDagRunQueue, "id"), pks, type="bigint")
    # planned per call (statements_cursor): a prepared plan made on an almost empty queue
    # filtered every row of the grown queue by every id (11,000 rows, 418 ids: 100 ms); planned
    # for the queue's current size, the ids are probed in its primary key (current statistics)
    with statements_cursor(prepare=False) as cursor:
        sql.execute(cursor, f"DELETE FROM {table(AssetDagRunQueue)} WHERE {among}", [ids])  # noqa: S608 - names from the models, values bound as parameters


def _conditions_of(
    active: Mapping[str, _LockedDag], queued: Mapping[str, _QueueRows], *, batch: _Batch
) -> dict[str, Condition]:
    """The conditions of the ``active`` DAGs that have locked queue rows. The others are
    settled in ``batch``: no rows (not ready), no longer asset-scheduled (re-declared with
    another schedule: as Airflow does, their rows are dropped), or an unreadable expression."""
    conditions: dict[str, Condition] = {}
    for dag_id, dag in active.items():
        rows = queued.get(dag_id)
        if not rows:
            batch.settle(dag_id, Outcome.NOT_READY)
        elif dag.asset_expression is None:
            batch.delete_pks += rows.pks
            batch.settle(dag_id, Outcome.DROPPED)
        else:
            try:
                conditions[dag_id] = condition_of(dag_id, dag.asset_expression)
            except InvalidAssetExpression as exc:
                logger.error("DAG %s has an invalid asset_expression: %s", dag_id, exc)
                batch.settle(dag_id, Outcome.INVALID)
    return conditions


@dataclass(frozen=True)
class _LockedDag:
    dag_id: str
    is_paused: bool
    is_stale: bool
    #: as stored (JSON text), ``None`` if not asset-scheduled
    asset_expression: str | None
    one_run_per_event: bool
    room: DagRoom
    #: when its latest asset-triggered run was created (where its events scan starts)
    latest_run_created_at: datetime | None

    @property
    def max_active_runs(self) -> int:
        return self.room.max_active_runs

    @property
    def active_runs(self) -> int:
        """Its runs queued or running."""
        return self.room.running + self.room.queued


def _dags_lock(dag_ids: Sequence[str], *, limit: int | None) -> list[_LockedDag]:
    """Lock the rows of ``dag_ids`` that no other transaction holds, in the order given
    (``FOR NO KEY UPDATE SKIP LOCKED``); with a ``limit``, only the first ``limit`` of them
    that still have queue rows (1 statement, with each DAG's active runs and latest
    asset-triggered run)."""
    sql = Dialect.current()
    d, q, r = of("d", Dag), of("q", AssetDagRunQueue), of("a", DagRun)
    # a probe of the queue's target_dag index per DAG: as a semi-join PostgreSQL read the whole
    # queue (and the dead rows producers and schedulers leave) for each batch, 10 ms
    claim = (
        f"WHERE EXISTS (SELECT 1 FROM {table(AssetDagRunQueue)} q "  # noqa: S608 - names from the models, values bound as parameters
        f"WHERE {q('target_dag')} = {d('dag_id')} {sql.probe}) "
        f"ORDER BY r.n LIMIT {int(limit)}"
        if limit is not None
        else "ORDER BY r.n"
    )
    lock = "FOR NO KEY UPDATE OF d SKIP LOCKED" if sql.postgresql else ""
    # planned per call: it probes the queue, whose size swings (see statements_cursor)
    with statements_cursor(prepare=False) as cursor:
        sql.execute(
            cursor,
            f"""
            SELECT {d("dag_id")}, {d("is_paused")}, {d("is_stale")}, {d("asset_expression")},
                {d("max_active_runs")}, {d("one_run_per_event")}, {d("task_ids")},
                (SELECT COUNT(*) FROM {table(DagRun)} a WHERE {r("dag")} = {d("dag_id")}
                    AND {r("state")} = %s),
                (SELECT COUNT(*) FROM {table(DagRun)} a WHERE {r("dag")} = {d("dag_id")}
                    AND {r("state")} = %s),
                (SELECT MAX({r("created_at")}) FROM {table(DagRun)} a
                    WHERE {r("dag")} = {d("dag_id")} AND {r("run_type")} = %s)
            FROM {sql.rows(dag_id="text", n="integer")} JOIN {table(Dag)} d
                ON {d("dag_id")} = r.dag_id
            {claim} {lock}
            """,  # noqa: S608 - names from the models, values bound as parameters
            [
                DagRunState.RUNNING.value,
                DagRunState.QUEUED.value,
                DagRunType.ASSET_TRIGGERED.value,
                sql.json({"dag_id": dag_id, "n": n} for n, dag_id in enumerate(dag_ids)),
            ],
        )
        rows = cursor.fetchall()
    # converted as the ORM reads the columns
    task_ids = column_values(Dag, "task_ids", [row[6] for row in rows])
    latest_runs = column_values(DagRun, "created_at", [row[9] for row in rows])
    return [
        _LockedDag(
            dag_id=dag_id,
            is_paused=bool(is_paused),
            is_stale=bool(is_stale),
            asset_expression=expression,
            one_run_per_event=bool(per_event),
            room=DagRoom(
                is_paused=bool(is_paused),
                max_active_runs=cap,
                running=running,
                queued=queued,
                task_ids=tasks or [],
            ),
            latest_run_created_at=latest,
        )
        for (
            (dag_id, is_paused, is_stale, expression, cap, per_event, _, running, queued, _),
            tasks,
            latest,
        ) in zip(rows, task_ids, latest_runs, strict=True)
    ]


def _runs_plan(
    met: Collection[str],
    consumed: Mapping[str, list[int]],
    *,
    queued: Mapping[str, _QueueRows],
    active: Mapping[str, _LockedDag],
    batch: _Batch,
) -> tuple[list[_NewRun], set[str]]:
    """The runs to create for the DAGs whose condition is met, and the ``one_run_per_event``
    DAGs that keep their queue rows because more events wait than they have free slots; the
    rows of the others go (``batch.delete_pks``), and a DAG with nothing new to consume is
    settled."""
    runs: list[_NewRun] = []
    more: set[str] = set()  # one_run_per_event DAGs with events left for later runs
    for dag_id in met:
        events = consumed.get(dag_id)
        run_after = queued[dag_id].newest
        assert run_after is not None  # noqa: S101 - every DAG here has rows, one the newest
        if not events:
            batch.delete_pks += queued[dag_id].pks
            batch.settle(dag_id, Outcome.NOTHING_TO_CONSUME)
        elif active[dag_id].one_run_per_event:
            free = active[dag_id].max_active_runs - active[dag_id].active_runs
            runs += [_NewRun(dag_id, run_after, (event,)) for event in sorted(events)[:free]]
            if len(events) > free:
                more.add(dag_id)  # its rows stay: the rest wait for free slots
            else:
                batch.delete_pks += queued[dag_id].pks
        else:
            runs.append(_NewRun(dag_id, run_after, tuple(events)))
            batch.delete_pks += queued[dag_id].pks
    return runs, more


@dataclass(frozen=True)
class _NewRun:
    dag_id: str
    run_after: datetime
    event_ids: tuple[int, ...]


def _runs_insert(
    runs: list[_NewRun],
    *,
    rooms: Mapping[str, DagRoom],
    settle: Callable[..., None],
    more: set[str],
) -> None:
    """Insert the runs with their task instances (``runs.admit.dag_runs_insert``) and their
    consumed events (5-6 statements; the notification is none on SQLite)."""
    created = dag_runs_insert(
        [
            RunSpec(
                dag_id=run.dag_id,
                run_id=DagRun.generate_run_id(
                    run_type=DagRunType.ASSET_TRIGGERED, logical_date=None, run_after=run.run_after
                ),
                run_type=DagRunType.ASSET_TRIGGERED,
                run_after=run.run_after,
                triggered_by=DagRunTriggeredBy.ASSET,
            )
            for run in runs
        ],
        rooms=rooms,
    )
    consumed = [
        {"dag_run": new.dag_run_pk, "event": event_id, "dag_id": run.dag_id}
        for run, new in zip(runs, created, strict=True)
        for event_id in run.event_ids
    ]
    if consumed:  # a row set, as the runs: no model instance per row (bulk_create)
        model_rows_insert(DagRunAssetEvent, consumed)
    by_dag: dict[str, list[AssetTriggeredRun]] = {}
    for run, new in zip(runs, created, strict=True):
        by_dag.setdefault(run.dag_id, []).append(
            AssetTriggeredRun(
                dag_id=run.dag_id,
                run_id=new.run_id,
                dag_run_pk=new.dag_run_pk,
                run_after=run.run_after,
                event_ids=run.event_ids,
                task_ids=new.task_ids,
            )
        )
    for dag_id, dag_runs in by_dag.items():
        settle(dag_id, Outcome.CREATED, tuple(dag_runs), more=dag_id in more)
    count = len(runs)
    transaction.on_commit(lambda: logger.info("created %d asset-triggered run(s)", count))
