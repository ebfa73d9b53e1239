"""Time-scheduled runs: a DAG with a time schedule gets a ``scheduled`` run when one is due.

Airflow 3.3's model (``DagModel.calculate_dagrun_date_fields``, the scheduler's
``_create_dag_runs``), with the timetable rules of :mod:`assets_app.timetables`:

- **The cursor.** ``Dag.next_dagrun`` is the logical date of the DAG's next time-scheduled
  run and ``Dag.next_dagrun_create_after`` when it is due (the same instant: a trigger
  timetable's run is one moment, logical date = data interval = ``run_after``); both ``NULL``
  when there is none (no time schedule, ``@once`` done, past the ``end_date``).
  :func:`dags_next_run_refresh` computes them from the timetable and the DAG's last automated
  (``scheduled`` or ``backfill``) run, as Airflow's DAG processor does on every parse; here on
  every declaration (``dags.dags_declare``). Creating runs moves the cursor on.
- **Creating** (:func:`dags_time_scheduled_runs_create`, every scheduler pass): the unpaused,
  non-stale DAGs whose cursor is due and that have fewer active (``queued`` + ``running``)
  runs than ``max_active_runs`` get the run at the cursor, with run id
  ``scheduled__<logical date ISO>`` (Airflow 3's), through ``runs.admit.dag_runs_insert``.
  With ``catchup`` each due moment follows the one before, as many as the DAG has room for
  (at most :data:`CATCHUP_BATCH` per transaction; the rest come next); without it, a cursor a
  whole period or more behind (the scheduler was down, the DAG paused) skips to the latest
  due moment (a timedelta schedule: to now), as Airflow's processor would have moved it, so
  no backlog is run. A DAG at ``max_active_runs`` is passed over until a run of it ends.
  A moment already taken by another run of the DAG (a manual run with that logical date or
  run id) is skipped, as Airflow's scheduler skips it.

Exactly once, with any number of schedulers: DAGs are handled in batches, each one
transaction that first locks the rows of up to ``batch_size`` due DAGs (``FOR NO KEY UPDATE
SKIP LOCKED``, oldest due first; ``NO KEY`` so producers' foreign-key checks on the DAG never
wait), so two schedulers take disjoint batches and never wait for each other. Under the lock
it re-reads the DAG's active runs, creates the runs and moves the cursor in the same
transaction. A row another scheduler changed and committed after the locking statement
began is checked again on its committed version (PostgreSQL does so for a row it locks),
whose cursor moved on: not due any more. The unique ``(dag, run_id)`` constraint backs it:
a moment has one run id. A scheduler killed mid-batch loses its open transaction and nothing
else: no run, no task instance, no moved cursor; the next pass creates that batch's runs. A
declaration that refreshes the cursor writes the DAG row first (so it waits for, or is
skipped by, a batch holding it) and reads the last run after that, so it sees every run a
batch committed.

On SQLite ``select_for_update`` is a no-op; its ``IMMEDIATE`` transactions (settings) run
the batches one at a time, which gives the same guarantees.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Count, F, IntegerField, Max, OuterRef, Q, Subquery, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from assets_app.models import Dag, DagRun, DagRunState, DagRunTriggeredBy, DagRunType
from assets_app.services.runs.admit import RunSpec, dag_runs_insert, dags_room
from assets_app.timetables import DagRunInfo, Timetable, timetable_from_json

logger = logging.getLogger(__name__)

#: DAGs handled in one transaction.
BATCH_SIZE = 100
#: The most catch-up runs one DAG gets in one transaction (the rest in the next).
CATCHUP_BATCH = 50

#: Runs that count against ``max_active_runs`` when deciding to create a scheduled run.
ACTIVE_RUN_STATES = (DagRunState.QUEUED, DagRunState.RUNNING)
#: Runs the timetable continues from (Airflow's "automated" runs).
AUTOMATED_RUN_TYPES = (DagRunType.SCHEDULED, DagRunType.BACKFILL)


@dataclass(frozen=True)
class TimeScheduledRun:
    """A run created because its time was due."""

    dag_id: str
    run_id: str
    dag_run_pk: int
    logical_date: datetime
    state: str  # running if admitted at creation, else queued
    task_ids: tuple[str, ...]


@dataclass
class TimeSchedulesResult:
    """What one call of :func:`dags_time_scheduled_runs_create` did."""

    created: list[TimeScheduledRun] = field(default_factory=list)
    #: due moments passed over because another run of the DAG holds them: (dag id, run id)
    taken: list[tuple[str, str]] = field(default_factory=list)


def _run_id(info: DagRunInfo) -> str:
    """``scheduled__<logical date ISO>``, as Airflow 3 names a time-scheduled run."""
    return DagRun.generate_run_id(
        run_type=DagRunType.SCHEDULED, logical_date=info.logical_date, run_after=info.run_after
    )


@dataclass(frozen=True)
class _Schedule:
    """What the timetable rules read of a DAG row."""

    dag_id: str
    timetable: Timetable | None
    start_date: datetime | None
    end_date: datetime | None
    catchup: bool

    def next_run(self, *, last_run_after: datetime | None, now: datetime) -> DagRunInfo | None:
        if self.timetable is None:
            return None
        return self.timetable.next_run(
            last_run_after=last_run_after,
            start_date=self.start_date,
            end_date=self.end_date,
            catchup=self.catchup,
            now=now,
        )


_SCHEDULE_FIELDS = ("dag_id", "timetable", "start_date", "end_date", "catchup")


def _schedule(
    dag_id: str,
    stored: Mapping[str, Any] | None,
    start_date: datetime | None,
    end_date: datetime | None,
    catchup: bool,
) -> _Schedule:
    """The row's schedule; an unreadable timetable is logged and schedules nothing."""
    timetable = None
    if stored is not None:
        try:
            timetable = timetable_from_json(stored)
        except (TypeError, ValueError) as exc:
            logger.error("DAG %s has an unreadable timetable %r: %s", dag_id, stored, exc)
    return _Schedule(dag_id, timetable, start_date, end_date, catchup)


# --- the cursor ----------------------------------------------------------------------------


def dags_next_run_refresh(*, dag_ids: Collection[str], now: datetime | None = None) -> None:
    """Compute ``next_dagrun`` / ``next_dagrun_create_after`` of ``dag_ids`` from their
    timetable, dates and catch-up flag and their last automated run (``NULL`` without a time
    schedule or a next run).

    Call in the transaction that wrote the DAG rows (it then holds them, see the module
    docstring). Three statements however many DAGs: the rows, their last runs, one
    ``UPDATE``.
    """
    if not dag_ids:
        return
    now = now or timezone.now()
    schedules = [
        _schedule(*row)
        for row in Dag.objects.filter(dag_id__in=list(dag_ids))
        .order_by("dag_id")
        .values_list(*_SCHEDULE_FIELDS)
    ]
    last = dict(
        DagRun.objects.filter(
            dag_id__in=[s.dag_id for s in schedules if s.timetable is not None],
            run_type__in=AUTOMATED_RUN_TYPES,
        )
        .values("dag_id")
        .annotate(last=Max("logical_date"))
        .order_by()
        .values_list("dag_id", "last")
    )
    _cursors_write(
        (s.dag_id, s.next_run(last_run_after=last.get(s.dag_id), now=now)) for s in schedules
    )


def _cursors_write(cursors: Iterable[tuple[str, DagRunInfo | None]]) -> None:
    """Store each DAG's next run (one ``UPDATE`` per 1000 DAGs, none without)."""
    rows = [
        Dag(
            dag_id=dag_id,
            next_dagrun=None if info is None else info.logical_date,
            next_dagrun_create_after=None if info is None else info.run_after,
        )
        for dag_id, info in cursors
    ]
    if rows:
        Dag.objects.bulk_update(rows, ["next_dagrun", "next_dagrun_create_after"], batch_size=1000)


# --- creating due runs ---------------------------------------------------------------------


def dags_time_scheduled_runs_create(
    *, now: datetime | None = None, batch_size: int = BATCH_SIZE
) -> TimeSchedulesResult:
    """Create the due time-scheduled runs of every DAG that has room for them (see the module
    docstring), in transactions of up to ``batch_size`` DAGs each, until no unheld due DAG is
    left. Call outside a transaction; ``now`` is the clock (default: the real one).

    Each transaction runs a fixed number of statements however many DAGs and runs it
    handles: lock the due DAGs, count their active runs (``runs.admit.dags_room``), look up
    the moments already taken, ``runs.admit.dag_runs_insert`` (three, four with the workers'
    notification), move the cursors.
    """
    now = now or timezone.now()
    result = TimeSchedulesResult()
    while True:
        handled = _batch_create(now=now, batch_size=batch_size, result=result)
        if handled < batch_size:
            return result


@dataclass(frozen=True)
class _DueDag:
    schedule: _Schedule
    next_dagrun: datetime


def _batch_create(*, now: datetime, batch_size: int, result: TimeSchedulesResult) -> int:
    """One batch (one transaction); returns how many DAGs it locked."""
    with transaction.atomic(durable=True):
        due = _due_dags_lock(now=now, limit=batch_size)
        if not due:
            return 0
        rooms = dags_room([dag.schedule.dag_id for dag in due])
        planned: list[tuple[_DueDag, DagRunInfo]] = []
        cursors: list[tuple[str, DagRunInfo | None]] = []
        for dag in due:
            found = rooms[dag.schedule.dag_id]
            room = min(found.max_active_runs - found.running - found.queued, CATCHUP_BATCH)
            moments, after = _moments(dag, room=room, now=now)
            planned += [(dag, info) for info in moments]
            cursors.append((dag.schedule.dag_id, after))
        taken = _taken_moments(planned)
        passed_over: list[tuple[str, str]] = []
        specs = []
        for dag, info in planned:
            run_id = _run_id(info)
            if {(dag.schedule.dag_id, run_id), (dag.schedule.dag_id, info.logical_date)} & taken:
                passed_over.append((dag.schedule.dag_id, run_id))
                continue
            specs.append(
                RunSpec(
                    dag_id=dag.schedule.dag_id,
                    run_id=run_id,
                    run_type=DagRunType.SCHEDULED,
                    run_after=info.run_after,
                    logical_date=info.logical_date,
                    data_interval_start=info.data_interval_start,
                    data_interval_end=info.data_interval_end,
                    triggered_by=DagRunTriggeredBy.TIMETABLE,
                )
            )
        created = dag_runs_insert(specs, rooms=rooms, now=now)
        _cursors_write(cursors)
    runs = [
        TimeScheduledRun(
            dag_id=new.dag_id,
            run_id=new.run_id,
            dag_run_pk=new.dag_run_pk,
            logical_date=spec.logical_date or spec.run_after,
            state=new.state,
            task_ids=new.task_ids,
        )
        for spec, new in zip(specs, created, strict=True)
    ]
    result.created += runs
    result.taken += passed_over
    if runs:
        logger.info("created %d time-scheduled run(s)", len(runs))
    for dag_id, run_id in passed_over:
        logger.warning("DAG %s: %s is taken by another run of it; passed over", dag_id, run_id)
    return len(due)


def _due_dags_lock(*, now: datetime, limit: int) -> list[_DueDag]:
    """Lock up to ``limit`` due DAGs that no other transaction holds, oldest due first: a
    cursor at or before ``now``, unpaused, not stale, below ``max_active_runs`` (1 statement;
    the counts are read again under the lock, by ``runs.admit.dags_room``)."""
    active = (
        DagRun.objects.filter(dag=OuterRef("pk"), state__in=ACTIVE_RUN_STATES)
        .order_by()
        .values("dag")
        .annotate(count=Count("pk"))
        .values("count")
    )
    rows = (
        Dag.objects.filter(
            next_dagrun_create_after__lte=now,
            next_dagrun__isnull=False,
            is_paused=False,
            is_stale=False,
        )
        .annotate(active=Coalesce(Subquery(active), Value(0), output_field=IntegerField()))
        .filter(active__lt=F("max_active_runs"))
        .order_by("next_dagrun_create_after", "dag_id")
        .select_for_update(skip_locked=True, no_key=True, of=("self",))
        .values_list(*_SCHEDULE_FIELDS, "next_dagrun")[:limit]
    )
    return [
        _DueDag(
            schedule=_schedule(dag_id, stored, start, end, catchup),
            next_dagrun=next_dagrun,
        )
        for dag_id, stored, start, end, catchup, next_dagrun in rows
    ]


def _moments(
    dag: _DueDag, *, room: int, now: datetime
) -> tuple[list[DagRunInfo], DagRunInfo | None]:
    """The due moments to create for ``dag`` (up to ``room``) and its cursor after them.

    The first is the cursor; without catch-up, a cursor a whole period behind skips to the
    latest due moment instead (what Airflow's processor would have moved it to). Each next
    moment is the timetable's next after the one before (pure; no statement).
    """
    schedule = dag.schedule
    if schedule.timetable is None:
        return [], None
    cursor: DagRunInfo | None = DagRunInfo.exact(dag.next_dagrun)
    if not schedule.catchup and not schedule.timetable.once:
        after = schedule.next_run(last_run_after=dag.next_dagrun, now=now)
        if after is not None and after.run_after <= now:
            cursor = after  # missed: only the latest runs, no backlog
    moments: list[DagRunInfo] = []
    while cursor is not None and cursor.run_after <= now and len(moments) < room:
        moments.append(cursor)
        cursor = schedule.next_run(last_run_after=cursor.run_after, now=now)
    return moments, cursor


def _taken_moments(planned: Collection[tuple[_DueDag, DagRunInfo]]) -> set[tuple[str, Any]]:
    """``(dag id, run id)`` and ``(dag id, logical date)`` of the existing runs among the
    planned moments (1 statement, none without plans)."""
    if not planned:
        return set()
    dag_ids = {dag.schedule.dag_id for dag, _ in planned}
    rows = DagRun.objects.filter(dag_id__in=dag_ids).filter(
        Q(run_id__in={_run_id(info) for _, info in planned})
        | Q(logical_date__in={info.logical_date for _, info in planned})
    )
    taken: set[tuple[str, Any]] = set()
    for dag_id, run_id, logical_date in rows.values_list("dag_id", "run_id", "logical_date"):
        taken.add((dag_id, run_id))
        if logical_date is not None:
            taken.add((dag_id, logical_date))
    return taken
