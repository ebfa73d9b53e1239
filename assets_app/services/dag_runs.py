"""DAG runs: triggering a DAG (``dag_run_trigger``: ``manage.py trigger_dag``, the operator
API), creating one task instance for an outside runner (``create_task_instance``), the task
instances a new run gets (``dags_task_ids``, also for the scheduler's asset-triggered runs),
and a run's state as its task instances start and finish.

A run is ``queued`` until its first task instance starts (``dag_run_start``: ``running``),
then ``success`` or ``failed`` with an ``end_date`` once none of its task instances is
unfinished (``dag_run_settle``; ``failed`` if any failed or is upstream_failed: Airflow's
``DagRun.update_state`` for tasks without dependencies). Clearing puts it back to ``queued``.
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone

from assets_app.exceptions import (
    DagNotFoundError,
    DagRunExistsError,
    DagStaleError,
    TaskInstanceInputError,
    TaskInstanceNotFoundError,
)
from assets_app.models import (
    FAILED_TI_STATES,
    FINISHED_TI_STATES,
    Dag,
    DagRun,
    DagRunState,
    DagRunType,
    DagTask,
    TaskInletAssetReference,
    TaskInstance,
    TaskInstanceState,
    TaskOutletAssetReference,
)
from assets_app.notify import RUNS_CHANNEL, notify
from assets_app.services.sql import column, table
from assets_app.tokens import token_issue, ttl_problem
from assets_app.validators import validate_id

logger = logging.getLogger(__name__)

#: The largest ``map_index`` and ``max_tries``: their columns are 32-bit integers.
INTEGER_MAX = 2**31 - 1
FINISHED_RUN_STATES = (DagRunState.SUCCESS, DagRunState.FAILED)
#: The most runs ``dag_runs_settle_finished`` ends in one call (the rest wait for the next).
SETTLE_LIMIT = 500

#: States a task instance may be created in: waiting for a runner, or already claimed.
CREATABLE_STATES = (TaskInstanceState.QUEUED, TaskInstanceState.RUNNING)


@dataclass(frozen=True)
class CreatedTaskInstance:
    task_instance: TaskInstance
    created: bool


def run_type_from_run_id(run_id: str) -> str:
    """Airflow run ids start with their type (``scheduled__2025-…``); anything else is manual."""
    prefix, separator, _ = run_id.partition("__")
    if separator and prefix in DagRunType.values:
        return prefix
    return DagRunType.MANUAL


def token_ttl_check(ttl_seconds: int | None) -> None:
    """Raise ``TaskInstanceInputError`` unless ``ttl_seconds`` is ``None`` (the default) or
    a usable token lifetime (1 s to ten years)."""
    if ttl_seconds is not None and (problem := ttl_problem(ttl_seconds)) is not None:
        raise TaskInstanceInputError(f"ttl {problem}")


def _check_id(label: str, value: str, *, pattern: bool = True) -> None:
    try:
        validate_id(value, pattern=pattern)
    except ValueError as exc:
        raise TaskInstanceInputError(f"{label} {exc}") from exc


@transaction.atomic
def task_instance_create(
    *,
    dag_id: str,
    task_id: str,
    run_id: str,
    map_index: int = -1,
    state: str = TaskInstanceState.QUEUED,
    max_tries: int | None = None,
) -> CreatedTaskInstance:
    """Get or create the DAG, its run and the task instance.

    An undeclared DAG is created (unpaused, no schedule) with this task. A declared DAG must
    not be stale and must declare ``task_id``. A new run is ``running`` with ``run_after`` =
    now and its type taken from the run id's prefix. An existing task instance is returned
    unchanged (``created`` is ``False``).
    """
    _check_id("dag id", dag_id)
    _check_id("task id", task_id)
    _check_id("run id", run_id, pattern=False)
    if not -1 <= map_index <= INTEGER_MAX:
        raise TaskInstanceInputError(
            f"map index must be -1 to {INTEGER_MAX}, got {map_index}"
            if map_index > INTEGER_MAX
            else f"map index must be -1 or more, got {map_index}"
        )
    if max_tries is not None and not 0 <= max_tries <= INTEGER_MAX:
        raise TaskInstanceInputError(
            f"max tries must be 0 to {INTEGER_MAX}, got {max_tries}"
            if max_tries > INTEGER_MAX
            else f"max tries must be 0 or more, got {max_tries}"
        )
    if state not in CREATABLE_STATES:
        raise TaskInstanceInputError(
            f"state must be one of {', '.join(CREATABLE_STATES)}, got {state!r}"
        )
    now = timezone.now()

    dag, _ = Dag.objects.get_or_create(dag_id=dag_id, defaults={"task_ids": [task_id]})
    if dag.is_stale:
        raise TaskInstanceInputError(f"DAG {dag_id!r} is stale (missing from {dag.fileloc})")
    if task_id not in dag.task_ids:
        if dag.fileloc:
            declared = ", ".join(dag.task_ids) or "none"
            raise TaskInstanceInputError(
                f"DAG {dag_id!r} (from {dag.fileloc}) has no task {task_id!r}; "
                f"its tasks: {declared}"
            )
        dag.task_ids = [*dag.task_ids, task_id]
        dag.save(update_fields=["task_ids"])

    dag_run, run_created = DagRun.objects.get_or_create(
        dag=dag,
        run_id=run_id,
        defaults={
            "run_type": run_type_from_run_id(run_id),
            "state": DagRunState.RUNNING,
            "run_after": now,
            "logical_date": now,
            "data_interval_start": now,
            "data_interval_end": now,
            "start_date": now,
        },
    )
    task_instance, created = TaskInstance.objects.get_or_create(
        dag_id=dag_id,
        run_id=run_id,
        task_id=task_id,
        map_index=map_index,
        defaults={
            "dag_run": dag_run,
            "state": state,
            "max_tries": _declared_retries(dag_id, task_id) if max_tries is None else max_tries,
            "start_date": now if state == TaskInstanceState.RUNNING else None,
        },
    )
    if created and dag_run.state in FINISHED_RUN_STATES:
        # a new task instance in a finished run: the run is not finished any more
        DagRun.objects.filter(pk=dag_run.pk).update(state=DagRunState.RUNNING, end_date=None)
        dag_run.state, dag_run.end_date = DagRunState.RUNNING, None
    elif created and state == TaskInstanceState.RUNNING:
        dag_run_start(dag_run, start_date=now)  # its run is running, so that it can settle
    logger.info(
        "task instance %s %s (%s.%s @ %s, run %s)",
        task_instance.pk,
        "created" if created else "already existed",
        dag_id,
        task_id,
        run_id,
        "created" if run_created else "existing",
    )
    return CreatedTaskInstance(task_instance=task_instance, created=created)


def manual_run_id(*, logical_date: datetime) -> str:
    """``manual__<logical date ISO>``, as Airflow 3 names a triggered run."""
    return f"{DagRunType.MANUAL}__{logical_date.isoformat()}"


@transaction.atomic
def dag_run_trigger(
    *,
    dag_id: str,
    run_id: str | None = None,
    conf: Mapping[str, Any] | None = None,
    logical_date: datetime | None = None,
    data_interval: tuple[datetime, datetime] | None = None,
    run_after: datetime | None = None,
    partition_key: str | None = None,
) -> DagRun:
    """Trigger a run of a declared DAG, as Airflow's ``airflow dags trigger`` and
    ``POST /dags/{dag_id}/dagRuns`` do: a ``manual`` run, ``queued``, with ``logical_date`` and
    data interval = ``logical_date`` (default now), ``run_after`` now, run id
    ``manual__<logical date>`` unless given (``data_interval``, ``run_after`` and
    ``partition_key`` as given, if given), and one ``scheduled`` task instance per declared
    task (``max_tries`` = its ``retries``) for a worker to claim; the workers are woken at
    commit. A paused DAG's run waits, as in Airflow: workers claim nothing of a paused DAG
    until it is unpaused.

    Raises ``DagNotFoundError`` (no such DAG), ``DagStaleError`` (gone from its file),
    ``DagRunExistsError`` (the run id is taken) and ``TaskInstanceInputError`` (a bad run id,
    a naive logical date, a conf that is not an object).
    """
    now = timezone.now()
    if logical_date is None:
        logical_date = now
    elif timezone.is_naive(logical_date):
        raise TaskInstanceInputError("logical date must have a timezone (e.g. +00:00)")
    if any(timezone.is_naive(value) for value in (*(data_interval or ()), run_after) if value):
        raise TaskInstanceInputError("data interval and run after must have a timezone")
    if conf is not None and not isinstance(conf, Mapping):
        raise TaskInstanceInputError(f"conf must be a JSON object, got {type(conf).__name__}")
    run_id = manual_run_id(logical_date=logical_date) if run_id is None else run_id
    _check_id("run id", run_id, pattern=False)
    dag = Dag.objects.select_for_update().filter(dag_id=dag_id).first()
    if dag is None:
        raise DagNotFoundError(f"DAG {dag_id!r} not found", dag_id=dag_id)
    if dag.is_stale:
        raise DagStaleError(
            f"DAG {dag_id!r} is stale (missing from {dag.fileloc or 'its manifest'}): "
            "declare it again to trigger it",
            dag_id=dag_id,
        )
    if DagRun.objects.filter(dag=dag, run_id=run_id).exists():
        raise DagRunExistsError(
            f"DAG {dag_id!r} has a run {run_id!r} already", dag_id=dag_id, run_id=run_id
        )
    dag_run = DagRun.objects.create(
        dag=dag,
        run_id=run_id,
        run_type=DagRunType.MANUAL,
        state=DagRunState.QUEUED,
        logical_date=logical_date,
        data_interval_start=data_interval[0] if data_interval else logical_date,
        data_interval_end=data_interval[1] if data_interval else logical_date,
        run_after=run_after or now,
        conf=dict(conf or {}),
        partition_key=partition_key,
        created_at=now,
    )
    task_ids = dags_task_ids({dag_id: dag.task_ids})[dag_id]
    retries = dags_task_retries([dag_id])
    TaskInstance.objects.bulk_create(
        [
            TaskInstance(
                dag_run=dag_run,
                dag_id=dag_id,
                run_id=run_id,
                task_id=task_id,
                max_tries=retries.get((dag_id, task_id), 0),
                state=TaskInstanceState.SCHEDULED,
            )
            for task_id in task_ids
        ]
    )
    notify(RUNS_CHANNEL)  # workers wake up when this commits
    count = len(task_ids)
    transaction.on_commit(
        lambda: logger.info("triggered %s run %s (%d task instance(s))", dag_id, run_id, count)
    )
    return dag_run


def dags_task_retries(dag_ids: Collection[str]) -> dict[tuple[str, str], int]:
    """``(dag_id, task_id)`` → the declared task's ``retries`` (a new task instance's
    ``max_tries``; 0 for a task no manifest declares): 1 query."""
    return {
        (dag_id, task_id): retries
        for dag_id, task_id, retries in DagTask.objects.filter(dag_id__in=dag_ids).values_list(
            "dag_id", "task_id", "retries"
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


def _declared_retries(dag_id: str, task_id: str) -> int:
    """The task's ``retries`` from its manifest, 0 for a task no manifest declares."""
    retries = (
        DagTask.objects.filter(dag_id=dag_id, task_id=task_id)
        .values_list("retries", flat=True)
        .first()
    )
    return retries or 0


def task_instance_token_issue(
    *, task_instance_id: str | uuid.UUID, ttl_seconds: int | None = None
) -> str:
    """A runner token for an existing task instance.

    Raises ``TaskInstanceInputError`` for a malformed id or ttl and
    ``TaskInstanceNotFoundError`` for an unknown one.
    """
    try:
        ti_id = uuid.UUID(str(task_instance_id))
    except ValueError as exc:
        raise TaskInstanceInputError(
            f"malformed task instance id {str(task_instance_id)!r}: expected a UUID"
        ) from exc
    token_ttl_check(ttl_seconds)
    if not TaskInstance.objects.filter(pk=ti_id).exists():
        raise TaskInstanceNotFoundError(f"no task instance with id {ti_id}")
    return token_issue(task_instance_id=ti_id, ttl_seconds=ttl_seconds)


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
    now.

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
    with connection.cursor() as cursor:
        cursor.execute(
            _settle_sql(),
            [
                dag_run_id,
                *(state.value for state in FAILED_TI_STATES),
                DagRunState.FAILED.value,
                DagRunState.SUCCESS.value,
                connection.ops.adapt_datetimefield_value(end_date or timezone.now()),
                dag_run_id,
                DagRunState.RUNNING.value,
                dag_run_id,
                *(state.value for state in FINISHED_TI_STATES),
            ],
        )
        settled = cursor.rowcount
    if settled:
        logger.info("DAG run %s finished", dag_run_id)
    return bool(settled)


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
def _settle_sql() -> str:
    run_table, ti_table = table(DagRun), table(TaskInstance)
    run_id, run_state, run_end = (column(DagRun, f) for f in ("id", "state", "end_date"))
    ti_run, ti_state = (column(TaskInstance, f) for f in ("dag_run", "state"))

    def placeholders(values: Collection[str]) -> str:
        return ", ".join(["%s"] * len(values))

    return " ".join(
        f"""
        UPDATE {run_table} SET
            {run_state} = CASE WHEN EXISTS (
                SELECT 1 FROM {ti_table} WHERE {ti_run} = %s
                AND {ti_state} IN ({placeholders(FAILED_TI_STATES)})
            ) THEN %s ELSE %s END,
            {run_end} = %s
        WHERE {run_id} = %s AND {run_state} = %s
        AND NOT EXISTS (
            SELECT 1 FROM {ti_table} WHERE {ti_run} = %s
            AND ({ti_state} IS NULL OR {ti_state} NOT IN ({placeholders(FINISHED_TI_STATES)}))
        )
        """.split()  # noqa: S608 - names from the models, values bound as parameters
    )
