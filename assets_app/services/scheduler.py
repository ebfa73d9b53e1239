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
:func:`assets_app.services.registration.asset_event_consumers_queue`) in the transaction that
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
import json
import logging
import secrets
import string
import time
import uuid
from collections import deque
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, TypeVar

from django.db import DatabaseError, connection, transaction
from django.db.models import Exists, Max, Model, OuterRef, Q
from django.utils import timezone

from assets_app.conditions import (
    Condition,
    ConditionReferences,
    Resolution,
    condition_is_met,
    condition_parse,
    condition_references,
)
from assets_app.exceptions import InvalidAssetExpression
from assets_app.models import (
    Asset,
    AssetActive,
    AssetAlias,
    AssetAliasAsset,
    AssetAliasAssetEvent,
    AssetDagRunQueue,
    AssetEvent,
    Dag,
    DagRun,
    DagRunAssetEvent,
    DagRunState,
    DagRunType,
    DagTask,
    TaskInletAssetReference,
    TaskInstance,
    TaskInstanceState,
    TaskOutletAssetReference,
)
from assets_app.notify import RUNS_CHANNEL, notify
from assets_app.services.sql import Dialect, column_name
from task_sdk.definitions import AssetUniqueKey

logger = logging.getLogger(__name__)

K = TypeVar("K")
V = TypeVar("V")

#: How far before the previous asset-triggered run the event scan starts. An event is missed
#: only if its producer's transaction stayed open longer than this (requests time out long
#: before).
EVENT_LOOKBACK = timedelta(minutes=10)

#: DAGs handled in one transaction. Bounds the transaction, and so how long a producer may
#: wait for a queue row the scheduler holds.
BATCH_SIZE = 100

#: A claim looks at up to this many batches' worth of the ready list: room for the batch
#: another scheduler holds meanwhile (what more schedulers hold is passed over, and looked at
#: again next pass), without checking many more DAGs than it takes.
CLAIM_WINDOW = 2

#: See :class:`QueueWatch`: how long (seconds) queue row ids below the highest one seen are
#: still looked for, how often every waiting DAG is evaluated again, and how many per pass.
ROW_ID_OVERLAP = 2.0
FULL_RESCAN_EVERY = 10.0
SWEEP_CHUNK = 250

_RUN_ID_ALPHABET = string.ascii_letters + string.digits


class Outcome(enum.StrEnum):
    """What one DAG's transaction did."""

    CREATED = "created"  # a run was created
    NOT_READY = "not_ready"  # condition not met (or no queue rows left); rows wait
    LOCKED = "locked"  # another scheduler holds the DAG this pass
    INACTIVE = "inactive"  # paused or stale (or gone); rows wait
    NOTHING_TO_CONSUME = "nothing_to_consume"  # met, but every event was already consumed
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
    run: AssetTriggeredRun | None = None


@dataclass
class SchedulerPassResult:
    """Everything one pass did, DAG by DAG."""

    outcomes: list[DagOutcome] = field(default_factory=list)

    @property
    def created(self) -> list[AssetTriggeredRun]:
        return [o.run for o in self.outcomes if o.run is not None]

    def count(self, outcome: Outcome) -> int:
        return sum(1 for o in self.outcomes if o.outcome is outcome)


def asset_triggered_run_id(*, run_after: datetime) -> str:
    """``asset_triggered__<run_after ISO>_<8 random letters/digits>``, like Airflow 3."""
    suffix = "".join(secrets.choice(_RUN_ID_ALPHABET) for _ in range(8))
    return f"{DagRunType.ASSET_TRIGGERED}__{run_after.isoformat()}_{suffix}"


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
    queued = watch.scan() if watch is not None else _queued_dags()
    try:
        ready = _ready_dag_ids(queued, result=result)
    except BaseException:
        if watch is not None:
            watch.forget()  # the rows it just saw were not evaluated
        raise
    retry: list[str] = []
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
        retry += [o.dag_id for o in outcomes if o.outcome in _RETRIED]
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


_RETRIED = frozenset({Outcome.LOCKED, Outcome.FAILED, Outcome.NOT_READY})


@dataclass(frozen=True)
class _QueuedDag:
    """An unpaused, non-stale DAG with queue rows, as a pass reads it (no locks)."""

    dag_id: str
    #: ``Dag.asset_expression`` as stored (JSON text), ``None`` if not asset-scheduled
    expression: str | None
    asset_ids: frozenset[int]
    row_ids: tuple[int, ...]


def _queued_dags(dag_ids: Collection[str] | None = None) -> list[_QueuedDag]:
    """The unpaused, non-stale DAGs with queue rows (of ``dag_ids`` only, if given), the
    longest-waiting first (their oldest queue row), with their queued assets; no locks.

    One row per DAG, its expression included, and no datetime to convert: a full scan of tens
    of thousands of queue rows is one cheap statement.
    """
    sql = Dialect.current()
    queue, dag = AssetDagRunQueue._meta.db_table, Dag._meta.db_table
    only = f"AND q.target_dag_id IN (SELECT r.dag_id FROM {sql.rows(dag_id='text')})"
    with connection.cursor() as cursor:
        sql.execute(
            cursor,
            f"""
            SELECT d.dag_id, d.asset_expression, {sql.joined_integers("q.asset_id")},
                {sql.joined_integers("q.id")}
            FROM {queue} q JOIN {dag} d ON d.dag_id = q.target_dag_id
            WHERE NOT d.is_paused AND NOT d.is_stale {only if dag_ids is not None else ""}
            GROUP BY d.dag_id
            ORDER BY min(q.created_at), d.dag_id
            """,
            [] if dag_ids is None else [sql.json({"dag_id": dag_id} for dag_id in dag_ids)],
        )
        return [
            _QueuedDag(
                dag_id=dag_id,
                expression=expression,
                asset_ids=frozenset(map(int, asset_ids.split(","))),
                row_ids=tuple(map(int, row_ids.split(","))),
            )
            for dag_id, expression, asset_ids, row_ids in cursor.fetchall()
        ]


@dataclass
class QueueWatch:
    """What one scheduler process remembers between passes, so a pass looks at new work only.

    A pass that finds no ready DAG should cost next to nothing however many DAGs wait with a
    condition not met yet. A DAG's readiness changes only when it gets a new queue row, and a
    new row gets a higher id (the table's sequence; a producer's upsert that only meets an
    existing row keeps it, and adds no asset). So :meth:`scan` reads the ids and DAGs of the
    rows above a bound, and then all queue rows of just the DAGs that have a row it has not
    seen yet, or that the previous pass asked to :meth:`retry` (met but not created: locked
    by another scheduler, a row held by a producer, a failed transaction).

    Ids are drawn when a producer inserts, not when it commits: a row can become visible after
    rows with higher ids. So the bound is not the highest id seen but the highest id seen by
    the newest pass that started at least ``overlap`` seconds ago; ids already evaluated above
    it are skipped by remembering them. A row committed more than ``overlap`` seconds after
    taking its id (a producer stalled between its upsert and its commit), and anything else
    a new id does not signal (a DAG unpaused, an alias resolving to a new asset, a ref's asset
    becoming active), is picked up by the **sweep**: every ``full_rescan_every`` seconds the
    watch lists every DAG with queue rows and evaluates them all again, ``sweep_chunk`` DAGs
    per pass (so no single pass stalls behind thousands of waiting DAGs), within two sweeps.
    The first pass evaluates every DAG at once.
    """

    full_rescan_every: float = FULL_RESCAN_EVERY
    overlap: float = ROW_ID_OVERLAP
    sweep_chunk: int = SWEEP_CHUNK
    clock: Callable[[], float] = time.monotonic
    _last_full: float | None = None
    _high_water: int = 0
    #: (pass start, highest id seen by then), oldest first
    _marks: deque[tuple[float, int]] = field(default_factory=deque)
    #: ids above the current bound that were already evaluated
    _seen: set[int] = field(default_factory=set)
    _retry: set[str] = field(default_factory=set)
    #: DAGs the current sweep has still to evaluate
    _sweep: list[str] = field(default_factory=list)

    def scan(self) -> list[_QueuedDag]:
        """The DAGs worth evaluating this pass, as :func:`_queued_dags` (1-3 queries, no locks)."""
        now = self.clock()
        bound = self._bound(now)
        if self._last_full is None:
            queued = _queued_dags()
            self._last_full = now
            self._sweep = []
            new_ids = [pk for dag in queued for pk in dag.row_ids]
        else:
            if not self._sweep and now - self._last_full >= self.full_rescan_every:
                self._sweep = sorted(
                    set(AssetDagRunQueue.objects.order_by().values_list("target_dag_id", flat=True))
                )
                self._last_full = now
            fresh = list(
                AssetDagRunQueue.objects.filter(pk__gt=bound)
                .order_by()
                .values_list("pk", "target_dag_id")
            )
            dag_ids = {dag_id for pk, dag_id in fresh if pk not in self._seen} | self._retry
            dag_ids.update(self._sweep[: self.sweep_chunk])
            del self._sweep[: self.sweep_chunk]
            queued = _queued_dags(dag_ids) if dag_ids else []
            new_ids = [pk for pk, _ in fresh]
        self._retry = set()
        self._seen.update(pk for pk in new_ids if pk > bound)
        self._high_water = max([self._high_water, *new_ids])
        self._marks.append((now, self._high_water))
        return queued

    def forget(self) -> None:
        """Make the next pass a full rescan (this one failed after :meth:`scan`)."""
        self._last_full = None

    def retry(self, dag_ids: Collection[str]) -> None:
        """Evaluate these DAGs again next pass, new queue rows or not."""
        self._retry.update(dag_ids)

    def _bound(self, now: float) -> int:
        """Highest id seen by the newest pass at least ``overlap`` old (0 if none); prunes."""
        while len(self._marks) > 1 and self._marks[1][0] <= now - self.overlap:
            self._marks.popleft()
        if not self._marks or self._marks[0][0] > now - self.overlap:
            return 0
        bound = self._marks[0][1]
        self._seen = {pk for pk in self._seen if pk > bound}
        return bound


def _ready_dag_ids(queued: Sequence[_QueuedDag], *, result: SchedulerPassResult) -> list[str]:
    """The DAGs of ``queued`` worth a transaction, in the same order (0-3 queries, no locks).

    DAGs whose condition is not met (or unreadable) are recorded in ``result`` and left out.
    """
    conditions: dict[str, Condition] = {}
    for dag in queued:
        if dag.expression is None:
            continue  # ready: its rows are dropped under lock
        try:
            conditions[dag.dag_id] = _condition_of(dag.dag_id, dag.expression)
        except InvalidAssetExpression as exc:
            logger.error("DAG %s has an invalid asset_expression: %s", dag.dag_id, exc)
            result.outcomes.append(DagOutcome(dag_id=dag.dag_id, outcome=Outcome.INVALID))
    resolution = _condition_resolve(condition_references(*conditions.values()))
    ready: list[str] = []
    for dag in queued:
        condition = conditions.get(dag.dag_id)
        if condition is None:
            if dag.expression is None:
                ready.append(dag.dag_id)
        elif condition_is_met(condition, resolution=resolution, ready_asset_ids=dag.asset_ids):
            ready.append(dag.dag_id)
        else:
            result.outcomes.append(DagOutcome(dag_id=dag.dag_id, outcome=Outcome.NOT_READY))
    return ready


#: dag_id → (its asset_expression as stored, parsed): parsing is most of evaluating.
_parsed: dict[str, tuple[str, Condition]] = {}


def _condition_of(dag_id: str, expression: str) -> Condition:
    """The condition of ``expression`` (JSON text, as stored), remembered per DAG while its
    expression is the same."""
    cached = _parsed.get(dag_id)
    if cached is not None and cached[0] == expression:
        return cached[1]
    try:
        document = json.loads(expression)
    except ValueError as exc:
        raise InvalidAssetExpression(f"not JSON: {exc}") from exc
    condition = condition_parse(document)
    _parsed[dag_id] = (expression, condition)
    return condition


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
    outcomes: dict[str, DagOutcome] = {}

    def settle(dag_id: str, outcome: Outcome, run: AssetTriggeredRun | None = None) -> None:
        outcomes[dag_id] = DagOutcome(dag_id=dag_id, outcome=outcome, run=run)

    with transaction.atomic(durable=True):
        locked = {dag.dag_id: dag for dag in _dags_lock(dag_ids, limit=limit)}
        if limit is not None:
            dag_ids = [dag_id for dag_id in dag_ids if dag_id in locked]
        active: dict[str, _LockedDag] = {}
        for dag_id in dag_ids:
            dag = locked.get(dag_id)
            if dag is None:
                settle(dag_id, Outcome.LOCKED)
            elif dag.is_paused or dag.is_stale:
                settle(dag_id, Outcome.INACTIVE)
            else:
                active[dag_id] = dag
        queued: dict[str, list[tuple[int, int, datetime]]] = {}
        if active:
            for pk, dag_id, asset_id, created_at in (
                AssetDagRunQueue.objects.select_for_update(skip_locked=True)
                .filter(target_dag_id__in=active)
                .order_by()
                .values_list("pk", "target_dag_id", "asset_id", "created_at")
            ):
                queued.setdefault(dag_id, []).append((pk, asset_id, created_at))

        delete_pks: list[int] = []
        conditions: dict[str, Condition] = {}
        for dag_id, dag in active.items():
            rows = queued.get(dag_id)
            if not rows:
                settle(dag_id, Outcome.NOT_READY)
            elif dag.asset_expression is None:
                # No longer asset-scheduled (re-declared with another schedule): as Airflow
                # does, its queue rows are dropped.
                delete_pks += [pk for pk, _, _ in rows]
                settle(dag_id, Outcome.DROPPED)
            else:
                try:
                    conditions[dag_id] = _condition_of(dag_id, dag.asset_expression)
                except InvalidAssetExpression as exc:
                    logger.error("DAG %s has an invalid asset_expression: %s", dag_id, exc)
                    settle(dag_id, Outcome.INVALID)
        resolution = _condition_resolve(condition_references(*conditions.values()))
        met: dict[str, Condition] = {}
        for dag_id, condition in conditions.items():
            ready_asset_ids = {asset_id for _, asset_id, _ in queued[dag_id]}
            if condition_is_met(condition, resolution=resolution, ready_asset_ids=ready_asset_ids):
                met[dag_id] = condition
            else:
                settle(dag_id, Outcome.NOT_READY)

        consumed = _unconsumed_event_ids(conditions=met, resolution=resolution)
        runs: list[tuple[str, datetime]] = []  # (dag_id, run_after)
        for dag_id in met:
            delete_pks += [pk for pk, _, _ in queued[dag_id]]
            if not consumed.get(dag_id):
                settle(dag_id, Outcome.NOTHING_TO_CONSUME)
                continue
            runs.append((dag_id, max(created_at for _, _, created_at in queued[dag_id])))
        if runs:
            _runs_insert(
                runs,
                declared_tasks={dag_id: dag.task_ids for dag_id, dag in active.items()},
                consumed=consumed,
                settle=settle,
            )
        if delete_pks:
            _rows_statement(
                f"DELETE FROM {AssetDagRunQueue._meta.db_table} "
                "WHERE id IN (SELECT r.id FROM {rows})",
                [{"id": pk} for pk in delete_pks],
                id="bigint",
            )
    return [outcomes[dag_id] for dag_id in dag_ids]


@dataclass(frozen=True)
class _LockedDag:
    dag_id: str
    is_paused: bool
    is_stale: bool
    #: as stored (JSON text), ``None`` if not asset-scheduled
    asset_expression: str | None
    task_ids: list[Any]


def _dags_lock(dag_ids: Sequence[str], *, limit: int | None) -> list[_LockedDag]:
    """Lock the rows of ``dag_ids`` that no other transaction holds, in the order given
    (``FOR NO KEY UPDATE SKIP LOCKED``); with a ``limit``, only the first ``limit`` of them
    that still have queue rows (1 statement)."""
    sql = Dialect.current()
    queue, dag = AssetDagRunQueue._meta.db_table, Dag._meta.db_table
    claim = (
        f"WHERE EXISTS (SELECT 1 FROM {queue} q WHERE q.target_dag_id = d.dag_id) "
        f"ORDER BY r.n LIMIT {int(limit)}"
        if limit is not None
        else "ORDER BY r.n"
    )
    lock = "FOR NO KEY UPDATE OF d SKIP LOCKED" if sql.postgresql else ""
    with connection.cursor() as cursor:
        sql.execute(
            cursor,
            f"""
            SELECT d.dag_id, d.is_paused, d.is_stale, d.asset_expression, d.task_ids
            FROM {sql.rows(dag_id="text", n="integer")} JOIN {dag} d ON d.dag_id = r.dag_id
            {claim} {lock}
            """,
            [sql.json({"dag_id": dag_id, "n": n} for n, dag_id in enumerate(dag_ids))],
        )
        return [
            _LockedDag(
                dag_id=dag_id,
                is_paused=bool(is_paused),
                is_stale=bool(is_stale),
                asset_expression=expression,
                task_ids=json.loads(task_ids) if task_ids else [],
            )
            for dag_id, is_paused, is_stale, expression, task_ids in cursor.fetchall()
        ]


def _runs_insert(
    runs: list[tuple[str, datetime]],
    *,
    declared_tasks: Mapping[str, list[Any]],
    consumed: Mapping[str, list[int]],
    settle: Callable[[str, Outcome, AssetTriggeredRun], None],
) -> None:
    """Insert the runs (``(dag_id, run_after)``: one per DAG), their consumed events and their
    task instances, and notify the workers (4-7 statements; the notification is none on
    SQLite)."""
    now = Dialect.json_datetime(timezone.now())
    run_ids = {dag_id: asset_triggered_run_id(run_after=run_after) for dag_id, run_after in runs}
    dag_run_pks: dict[str, int] = {
        dag_id: pk
        for pk, dag_id in _model_rows_insert(
            DagRun,
            [
                {
                    "dag": dag_id,
                    "run_id": run_ids[dag_id],
                    "run_after": Dialect.json_datetime(run_after),
                    "run_type": DagRunType.ASSET_TRIGGERED.value,
                    "state": DagRunState.QUEUED.value,
                    "created_at": now,
                }
                for dag_id, run_after in runs
            ],
            returning=("id", "dag"),
        )
    }
    _rows_statement(
        f"INSERT INTO {DagRunAssetEvent._meta.db_table} (dag_run_id, event_id) "
        "SELECT r.dag_run_id, r.event_id FROM {rows}",
        [
            {"dag_run_id": dag_run_pks[dag_id], "event_id": event_id}
            for dag_id, _ in runs
            for event_id in consumed[dag_id]
        ],
        dag_run_id="bigint",
        event_id="bigint",
    )
    task_ids = _dags_task_ids({dag_id: declared_tasks[dag_id] for dag_id, _ in runs})
    retries = {
        (dag_id, task_id): retries
        for dag_id, task_id, retries in DagTask.objects.filter(
            dag_id__in=[dag_id for dag_id, _ in runs]
        ).values_list("dag_id", "task_id", "retries")
    }
    ti_pk = TaskInstance._meta.pk
    assert ti_pk is not None
    instances = [
        {
            "id": str(ti_pk.get_db_prep_value(uuid.uuid4(), connection)),
            "dag_run": dag_run_pks[dag_id],
            "dag_id": dag_id,
            "run_id": run_ids[dag_id],
            "task_id": task_id,
            "max_tries": retries.get((dag_id, task_id), 0),
            "state": TaskInstanceState.SCHEDULED.value,
        }
        for dag_id, _ in runs
        for task_id in task_ids[dag_id]
    ]
    if instances:
        _model_rows_insert(TaskInstance, instances)
    for dag_id, run_after in runs:
        settle(
            dag_id,
            Outcome.CREATED,
            AssetTriggeredRun(
                dag_id=dag_id,
                run_id=run_ids[dag_id],
                dag_run_pk=dag_run_pks[dag_id],
                run_after=run_after,
                event_ids=tuple(consumed[dag_id]),
                task_ids=tuple(task_ids[dag_id]),
            ),
        )
    notify(RUNS_CHANNEL)  # workers wake up when this commits
    count = len(runs)
    transaction.on_commit(lambda: logger.info("created %d asset-triggered run(s)", count))


#: Callable defaults whose one value serves every row of an ``INSERT`` (``_model_rows_insert``).
_SHARED = (timezone.now, dict, list)


def _model_rows_insert(
    model: type[Model], rows: Sequence[Mapping[str, Any]], *, returning: Sequence[str] = ()
) -> list[tuple[Any, ...]]:
    """``INSERT`` rows of ``model`` in one statement; the ``returning`` fields of the new rows.

    Each row maps the same field names to values ready for JSON (ids, strings, datetimes
    through :meth:`Dialect.json_datetime`); every other column but an auto-incremented id gets its
    field's default (``auto_now`` fields: now), the same for every row, so a field whose
    default must differ per row (``uuid.uuid4``) must be given (``ValueError`` otherwise).
    What ``bulk_create`` does, without preparing every field of every object one by one.
    """
    named = list(rows[0])
    columns = [column_name(model, name) for name in named]
    others = [
        field
        for field in model._meta.concrete_fields
        if field.name not in named and not getattr(field, "db_returning", False)
    ]
    per_row = [
        field.name
        for field in others
        if field.has_default() and callable(field.default) and field.default not in _SHARED
    ]
    if per_row:
        raise ValueError(f"{model.__name__} rows must give {', '.join(per_row)} (default per row)")
    defaults = [
        field.get_db_prep_save(
            timezone.now() if getattr(field, "auto_now", False) else field.get_default(),
            connection,
        )
        for field in others
    ]
    sql = Dialect.current()
    quote = connection.ops.quote_name
    targets = [*columns, *(column_name(model, f.name) for f in others)]
    statement = (
        f"INSERT INTO {model._meta.db_table} "
        f"({', '.join(quote(c) for c in targets)}) "
        f"SELECT {', '.join([f'r.{quote(c)}' for c in columns] + ['%s'] * len(others))} "
        f"FROM {sql.rows(model, named)}"
    )
    if returning:
        statement += " RETURNING " + ", ".join(quote(column_name(model, n)) for n in returning)
    with connection.cursor() as cursor:
        sql.execute(
            cursor,
            statement,
            [
                *defaults,
                sql.json(
                    {column: row[name] for name, column in zip(named, columns, strict=True)}
                    for row in rows
                ),
            ],
        )
        return cursor.fetchall() if returning else []


def _condition_resolve(references: ConditionReferences) -> Resolution:
    """Look up the asset ids of a condition's assets, aliases and refs (≤ 3 queries)."""
    asset_ids: dict[AssetUniqueKey, int] = {}
    if references.asset_keys:
        keys = {(key.name, key.uri): key for key in references.asset_keys}
        for pk, name, uri in Asset.objects.filter(
            name__in={key.name for key in references.asset_keys}
        ).values_list("pk", "name", "uri"):
            key = keys.get((name, uri))
            if key is not None:
                asset_ids[key] = pk
    alias_asset_ids: dict[str, set[int]] = {}
    if references.alias_names:
        for name, asset_id in AssetAliasAsset.objects.filter(
            alias__name__in=references.alias_names
        ).values_list("alias__name", "asset_id"):
            alias_asset_ids.setdefault(name, set()).add(asset_id)
    name_ref_ids: dict[str, int] = {}
    uri_ref_ids: dict[str, int] = {}
    if references.name_refs or references.uri_refs:
        names, uris = set(references.name_refs), set(references.uri_refs)
        for asset_id, name, uri in AssetActive.objects.filter(
            Q(name__in=names) | Q(uri__in=uris)
        ).values_list("asset_id", "name", "uri"):
            if name in names:
                name_ref_ids[name] = asset_id
            if uri in uris:
                uri_ref_ids[uri] = asset_id
    return Resolution(
        asset_ids=asset_ids,
        alias_asset_ids=alias_asset_ids,
        name_ref_ids=name_ref_ids,
        uri_ref_ids=uri_ref_ids,
    )


def _unconsumed_event_ids(
    *, conditions: Mapping[str, Condition], resolution: Resolution
) -> dict[str, list[int]]:
    """Per DAG, the ids of the events its new run consumes, oldest first (≤ 2 queries).

    The set-based form of :func:`_next_run_events`: events on the assets the condition names
    directly or by ref, and events emitted through one of its aliases; not partitioned; not
    consumed by an earlier run of the DAG; stamped later than ``EVENT_LOOKBACK`` before its
    latest asset-triggered run was created, if it has one.
    """
    if not conditions:
        return {}
    previous = dict(
        DagRun.objects.filter(dag_id__in=conditions, run_type=DagRunType.ASSET_TRIGGERED)
        .values("dag_id")
        .annotate(latest=Max("created_at"))
        .values_list("dag_id", "latest")
    )
    wanted: list[dict[str, Any]] = []
    for dag_id, condition in conditions.items():
        references = condition_references(condition)
        latest = previous.get(dag_id)
        after = None if latest is None else Dialect.json_datetime(latest - EVENT_LOOKBACK)
        direct = {resolution.asset_ids.get(key) for key in references.asset_keys}
        direct |= {resolution.name_ref_ids.get(name) for name in references.name_refs}
        direct |= {resolution.uri_ref_ids.get(uri) for uri in references.uri_refs}
        direct.discard(None)
        wanted += [{"dag_id": dag_id, "asset_id": asset_id, "after": after} for asset_id in direct]
        wanted += [
            {"dag_id": dag_id, "asset_id": asset_id, "alias": alias, "after": after}
            for alias in sorted(references.alias_names)
            for asset_id in resolution.alias_asset_ids.get(alias, ())
        ]
    if not wanted:
        return {}
    sql = Dialect.current()
    rows = sql.rows(dag_id="text", asset_id="bigint", alias="text", after="timestamptz")
    with connection.cursor() as cursor:
        sql.execute(
            cursor,
            f"""
            SELECT r.dag_id, e.id FROM {rows}
            JOIN {AssetEvent._meta.db_table} e ON e.asset_id = r.asset_id
            WHERE e.partition_key IS NULL
            AND (r.after IS NULL OR e.timestamp > r.after)
            AND (r.alias IS NULL OR EXISTS (
                SELECT 1 FROM {AssetAliasAssetEvent._meta.db_table} l
                JOIN {AssetAlias._meta.db_table} a ON a.id = l.alias_id
                WHERE l.event_id = e.id AND a.name = r.alias))
            AND NOT EXISTS (
                SELECT 1 FROM {DagRunAssetEvent._meta.db_table} c
                JOIN {DagRun._meta.db_table} d ON d.id = c.dag_run_id
                WHERE c.event_id = e.id AND d.dag_id = r.dag_id)
            ORDER BY r.dag_id, e.timestamp, e.id
            """,
            [sql.json(wanted)],
        )
        found: dict[str, dict[int, None]] = {}
        for dag_id, event_id in cursor.fetchall():
            found.setdefault(dag_id, {})[event_id] = None  # the same event via two leaves: once
    return {dag_id: list(ids) for dag_id, ids in found.items()}


def _rows_statement(statement: str, rows: Sequence[Mapping[str, Any]], **columns: str) -> None:
    """Run ``statement`` with its ``{rows}`` the given rows, passed as one JSON parameter.

    Rows by the thousand without a parameter (and its conversion) per value; see
    :class:`assets_app.services.sql.Dialect`. ``columns``: each row member's PostgreSQL type.
    """
    sql = Dialect.current()
    with connection.cursor() as cursor:
        sql.execute(cursor, statement.format(rows=sql.rows(None, (), **columns)), [sql.json(rows)])


def _next_run_events(
    *,
    dag_id: str,
    alias_names: Collection[str],
    resolution: Resolution,
    previous_run_at: datetime | None,
) -> Q:
    """The events the next asset-triggered run of ``dag_id`` consumes, as a filter on events.

    The one definition of what a run consumes (step 3 of the module docstring), used to create
    runs and to find the events still waiting for a consumer (:func:`events_awaiting_consumers`).
    ``previous_run_at``: when the DAG's latest asset-triggered run was created, if any.
    """
    resolved_ids = resolution.all_asset_ids()
    if not resolved_ids:
        return Q(pk__in=[])
    wanted = Q(asset_id__in=resolution.direct_asset_ids())
    if any(resolution.alias_asset_ids.values()):
        wanted |= Q(
            Exists(
                AssetAliasAssetEvent.objects.filter(
                    event_id=OuterRef("pk"), alias__name__in=alias_names
                )
            )
        )
    events = (
        wanted & Q(asset_id__in=resolved_ids, partition_key__isnull=True) & ~_consumed_by(dag_id)
    )
    if previous_run_at is not None:
        events &= Q(timestamp__gt=previous_run_at - EVENT_LOOKBACK)
    return events


def events_awaiting_consumers() -> Q:
    """A filter on events: those the next run of some **queued** DAG would consume.

    A DAG is queued when it has ``asset_dag_run_queue`` rows, paused and stale DAGs included
    (their rows wait for them). The events its next asset-triggered run consumes are exactly
    those of :func:`_next_run_events`: on an asset its schedule names directly or by ref, or
    emitted through one of its aliases; without a partition key; consumed by no run of that
    DAG yet; and, once the DAG has had an asset-triggered run, stamped later than
    ``EVENT_LOOKBACK`` before the latest one was created (older events are never consumed).
    A DAG that is no longer asset-scheduled waits for nothing (the scheduler drops its rows);
    one whose stored expression cannot be read keeps every event on its queued assets that no
    run of it consumed. Evaluated now: 1 query without queued DAGs, else 3-6.
    """
    queued_assets: dict[str, set[int]] = {}
    for dag_id, asset_id in AssetDagRunQueue.objects.order_by().values_list(
        "target_dag_id", "asset_id"
    ):
        queued_assets.setdefault(dag_id, set()).add(asset_id)
    if not queued_assets:
        return Q(pk__in=[])
    conditions: dict[str, Condition] = {}
    unreadable: list[str] = []
    for dag_id, expression in Dag.objects.filter(
        dag_id__in=queued_assets, asset_expression__isnull=False
    ).values_list("dag_id", "asset_expression"):
        try:
            conditions[dag_id] = condition_parse(expression)
        except InvalidAssetExpression:
            unreadable.append(dag_id)
    resolution = _condition_resolve(condition_references(*conditions.values()))
    previous_runs = dict(
        DagRun.objects.filter(dag_id__in=conditions, run_type=DagRunType.ASSET_TRIGGERED)
        .values("dag_id")
        .annotate(latest=Max("created_at"))
        .values_list("dag_id", "latest")
    )
    awaited = Q(pk__in=[])
    for dag_id, condition in sorted(conditions.items()):
        references = condition_references(condition)
        awaited |= _next_run_events(
            dag_id=dag_id,
            alias_names=references.alias_names,
            resolution=_resolution_restrict(resolution, references),
            previous_run_at=previous_runs.get(dag_id),
        )
    for dag_id in sorted(unreadable):
        awaited |= Q(asset_id__in=queued_assets[dag_id]) & ~_consumed_by(dag_id)
    return awaited


def _consumed_by(dag_id: str) -> Q:
    """Events some run of ``dag_id`` consumed."""
    return Q(
        Exists(DagRunAssetEvent.objects.filter(event_id=OuterRef("pk"), dag_run__dag_id=dag_id))
    )


def _resolution_restrict(resolution: Resolution, references: ConditionReferences) -> Resolution:
    """The part of a resolution shared by many DAGs that one DAG's condition refers to."""
    return Resolution(
        asset_ids=_part(resolution.asset_ids, references.asset_keys),
        alias_asset_ids=_part(resolution.alias_asset_ids, references.alias_names),
        name_ref_ids=_part(resolution.name_ref_ids, references.name_refs),
        uri_ref_ids=_part(resolution.uri_ref_ids, references.uri_refs),
    )


def _part(found: Mapping[K, V], wanted: Iterable[K]) -> dict[K, V]:
    """The entries of ``found`` under the ``wanted`` keys that it has."""
    return {key: found[key] for key in wanted if key in found}


def _dags_task_ids(declared: Mapping[str, list[Any]]) -> dict[str, list[str]]:
    """Each DAG's declared tasks (``declared``: its ``Dag.task_ids``); without a declared list,
    the tasks its asset references name (0 queries if every DAG declares its tasks, else 2)."""
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
