"""A run's state as its task instances start and finish (Airflow 3.3's
``DagRun.update_state``).

- **Starting**: a task instance that starts in a ``queued`` run makes it ``running``
  (:func:`dag_run_start`).
- **Settling**: a ``running`` run ends when none of its task instances is unfinished:
  ``failed`` if a leaf (a task no other depends on) is ``failed`` or ``upstream_failed``, else
  ``success`` (:func:`dag_run_settle`, after the commit that finished a task instance; on
  PostgreSQL often inside that very statement, :func:`dag_run_settle_step`). ``upkeep``
  settles what a process that died before settling left behind
  (:func:`dag_runs_settle_finished`).

The settle is one ``UPDATE``, written once (``_settle``) for both uses.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db import connection, transaction
from django.db.models import Exists, F, OuterRef, Q
from django.utils import timezone

from assets_app.models import (
    FAILED_TI_STATES,
    FINISHED_TI_STATES,
    Dag,
    DagRun,
    DagRunState,
    DagTask,
    TaskInstance,
    TaskInstanceState,
)
from assets_app.services.runs.callbacks import REASON_TIMED_OUT, dag_run_callback_request
from assets_app.services.sql import Statement, column, of, statements_cursor, table

logger = logging.getLogger(__name__)

#: The most runs ``dag_runs_settle_finished`` ends in one call (the rest wait for the next).
SETTLE_LIMIT = 500


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
        returning=f" RETURNING {column(DagRun, 'dag')}, {_callback_wanted()}",
    )
    with statements_cursor() as cursor:
        cursor.execute(statement.text, statement.params)
        row = cursor.fetchone()
    if row is not None:
        dag_run_ended(dag_run_id, dag_id=row[0], callback=row[1])
    return row is not None


def dag_run_ended(dag_run_id: int, *, dag_id: str = "", callback: str | None = None) -> None:
    """Say that a settle ended the run (this one or :func:`dag_run_settle_step`); ``callback``:
    the state it ended in when its DAG has a callback for it (``_callback_wanted``), which is
    then requested (``callbacks``: one ``INSERT``, only then)."""
    logger.info("DAG run %s finished", dag_run_id)
    if callback:
        dag_run_callback_request(dag_run_id=dag_run_id, dag_id=dag_id, state=callback)


@functools.cache
def _callback_wanted() -> str:
    """What a settle returns of the run it ended: its new state when its DAG has a callback
    for that state (``Dag.has_on_success_callback`` / ``has_on_failure_callback``), else
    ``''`` — read in the settle's own statement, so a DAG without callbacks costs none more."""
    run, dag = table(DagRun), of("cb_dag", Dag)
    state = f"{run}.{column(DagRun, 'state')}"
    return (
        f"(SELECT CASE WHEN {state} = '{DagRunState.SUCCESS.value}' "  # noqa: S608 - names from the models and a model constant
        f"AND {dag('has_on_success_callback')} THEN {state} "
        f"WHEN {state} = '{DagRunState.FAILED.value}' AND {dag('has_on_failure_callback')} "
        f"THEN {state} ELSE '' END FROM {table(Dag)} cb_dag "
        f"WHERE {dag('dag_id')} = {run}.{column(DagRun, 'dag')})"
    )


def dag_run_settle_step(*, finished: str, end_date: datetime) -> Statement:
    """:func:`dag_run_settle` as a step of the PostgreSQL statement that finishes a task
    instance: ``finished`` names the step returning it as it is now (``id``, ``dag_run_id``,
    ``dag_id``, ``task_id``, ``state``, ``has_downstream``); the step returns one row, one
    column, when it ended the run: the run's new state if its DAG has a callback for it, else
    ``''`` (``_callback_wanted``).

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
        returning=f" RETURNING {_callback_wanted()}",
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


def dag_runs_fail_timed_out(*, now: datetime | None = None) -> list[int]:
    """Fail the ``running`` runs that started more than their DAG's ``dagrun_timeout`` ago,
    as Airflow's scheduler does (``_schedule_dag_run``): the run ``failed`` (``end_date`` now)
    and each of its unfinished task instances ``skipped`` — a running one too, whose runner's
    next heartbeat is then refused (409), which stops the task —, and the DAG's failure
    callback requested with the reason ``timed_out``. Each run in its own transaction,
    re-checked under its ``UPDATE``; one query finds them (only DAGs with a timeout).
    ``upkeep`` calls it; returns the runs failed."""
    now = now or timezone.now()
    candidates = DagRun.objects.filter(
        state=DagRunState.RUNNING, start_date__isnull=False, dag__dagrun_timeout__isnull=False
    ).values_list(
        "pk", "dag_id", "start_date", "dag__dagrun_timeout", "dag__has_on_failure_callback"
    )
    failed: list[int] = []
    for pk, dag_id, start_date, timeout, callback in candidates[:SETTLE_LIMIT]:
        if timeout is None or start_date is None or start_date >= now - timedelta(seconds=timeout):
            continue
        with transaction.atomic():
            if not DagRun.objects.filter(pk=pk, state=DagRunState.RUNNING).update(
                state=DagRunState.FAILED, end_date=now
            ):
                continue  # it ended meanwhile
            unfinished = TaskInstance.objects.filter(dag_run_id=pk).filter(
                Q(state__isnull=True) | ~Q(state__in=FINISHED_TI_STATES)
            )
            skipped = {"state": TaskInstanceState.SKIPPED, "end_date": now, "updated_at": now}
            # one never scheduled was never tried (``advance.NEVER_TRIED``)
            unfinished.filter(state__isnull=True).update(
                **skipped, start_date=now, duration=0.0, try_number=F("try_number") - 1
            )
            unfinished.update(**skipped)
            if callback:
                dag_run_callback_request(
                    dag_run_id=pk, dag_id=dag_id, state=DagRunState.FAILED, reason=REASON_TIMED_OUT
                )
        logger.warning(
            "DAG run %s of %s timed out (dagrun_timeout %g s): failed", pk, dag_id, timeout
        )
        failed.append(pk)
    return failed


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
