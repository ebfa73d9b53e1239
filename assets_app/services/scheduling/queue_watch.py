"""What a long-running scheduler remembers between passes (:class:`QueueWatch`), and the
lock-free read of the DAGs waiting in ``asset_dag_run_queue`` (:func:`queued_dags`) that a pass
starts from."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from assets_app.models import AssetDagRunQueue, Dag, DagRun, DagRunState
from assets_app.services.sql import Dialect, of, statements_cursor, table

#: See :class:`QueueWatch`: how long (seconds) queue row ids below the highest one seen are
#: still looked for, how often every waiting DAG is evaluated again, and how many per pass.
ROW_ID_OVERLAP = 2.0
FULL_RESCAN_EVERY = 10.0
SWEEP_CHUNK = 250


@dataclass(frozen=True)
class QueuedDag:
    """An unpaused, non-stale DAG with queue rows, as a pass reads it (no locks)."""

    dag_id: str
    #: ``Dag.asset_expression`` as stored (JSON text), ``None`` if not asset-scheduled
    expression: str | None
    asset_ids: frozenset[int]
    row_ids: tuple[int, ...]
    #: as many runs queued or running as its ``max_active_runs``: no new run until one ends
    capped: bool = False


def queued_dags(dag_ids: Collection[str] | None = None) -> list[QueuedDag]:
    """The unpaused, non-stale DAGs with queue rows (of ``dag_ids`` only, if given), the
    longest-waiting first (their oldest queue row), with their queued assets; no locks.

    One row per DAG, its expression included, and no datetime to convert: a full scan of tens
    of thousands of queue rows is one cheap statement. Each says whether the DAG is
    ``capped`` (its active runs, counted once per DAG, reach its ``max_active_runs``).
    """
    sql = Dialect.current()
    d, q, r = of("d", Dag), of("q", AssetDagRunQueue), of("r", DagRun)
    only = f"AND {q('target_dag')} IN (SELECT r.dag_id FROM {sql.rows(dag_id='text')})"  # noqa: S608 - names from the models, values bound as parameters
    # planned per call: the queue's size swings (see statements_cursor)
    with statements_cursor(prepare=False) as cursor:
        sql.execute(
            cursor,
            f"""
            SELECT w.dag_id, w.expression, w.asset_ids, w.row_ids, (
                SELECT COUNT(*) FROM {table(DagRun)} r
                WHERE {r("dag")} = w.dag_id AND {r("state")} IN (%s, %s)
            ) >= w.cap
            FROM (
                SELECT {d("dag_id")} AS dag_id, {d("asset_expression")} AS expression,
                    {d("max_active_runs")} AS cap,
                    {sql.joined_integers(q("asset"))} AS asset_ids,
                    {sql.joined_integers(q("id"))} AS row_ids,
                    min({q("created_at")}) AS waiting_since
                FROM {table(AssetDagRunQueue)} q JOIN {table(Dag)} d
                    ON {d("dag_id")} = {q("target_dag")}
                WHERE NOT {d("is_paused")} AND NOT {d("is_stale")}
                    {only if dag_ids is not None else ""}
                GROUP BY {d("dag_id")}
            ) w
            ORDER BY w.waiting_since, w.dag_id
            """,  # noqa: S608 - names from the models, values bound as parameters
            [
                DagRunState.QUEUED.value,
                DagRunState.RUNNING.value,
                *([] if dag_ids is None else [sql.json({"dag_id": d} for d in dag_ids)]),
            ],
        )
        return [
            QueuedDag(
                dag_id=dag_id,
                expression=expression,
                asset_ids=frozenset(map(int, asset_ids.split(","))),
                row_ids=tuple(map(int, row_ids.split(","))),
                capped=bool(capped),
            )
            for dag_id, expression, asset_ids, row_ids, capped in cursor.fetchall()
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

    def scan(self) -> list[QueuedDag]:
        """The DAGs worth evaluating this pass, as :func:`queued_dags` (1-3 queries, no locks)."""
        now = self.clock()
        bound = self._bound(now)
        if self._last_full is None:
            queued = queued_dags()
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
            queued = queued_dags(dag_ids) if dag_ids else []
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
