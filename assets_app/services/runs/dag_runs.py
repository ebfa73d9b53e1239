"""DAG runs from outside the scheduler: triggering a DAG (``dag_run_trigger``: ``manage.py
trigger_dag``, the operator APIs), creating one task instance for an outside runner
(``task_instance_create``: ``manage.py create_task_instance``) and issuing its runner token.

A triggered run is created and admitted as every run is (``admit.dag_runs_insert``); its
state then follows its task instances (``settle``: ``running`` once one starts, ``success``
or ``failed`` once none is unfinished). Clearing puts it back to ``queued``.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from assets_app.exceptions import (
    DagNotFoundError,
    DagRunExistsError,
    DagStaleError,
    TaskInstanceInputError,
    TaskInstanceNotFoundError,
)
from assets_app.models import (
    FINISHED_RUN_STATES,
    NOTE_LENGTH,
    Dag,
    DagRun,
    DagRunNote,
    DagRunState,
    DagRunTriggeredBy,
    DagRunType,
    DagTask,
    TaskInstance,
    TaskInstanceState,
)
from assets_app.params import params_resolve
from assets_app.services.audit import Actor, event_log_record
from assets_app.services.inputs import checked_text
from assets_app.services.runs.admit import RunSpec, dag_runs_insert
from assets_app.services.runs.plans import NO_PLAN, dags_task_plans
from assets_app.services.runs.settle import dag_run_start
from assets_app.tokens import token_issue, ttl_problem
from assets_app.validators import json_value_problem, validate_id

logger = logging.getLogger(__name__)

#: The largest ``map_index`` and ``max_tries``: their columns are 32-bit integers.
INTEGER_MAX = 2**31 - 1

#: States a task instance may be created in: waiting for a runner, or already claimed.
CREATABLE_STATES = (TaskInstanceState.QUEUED, TaskInstanceState.RUNNING)


class Now:
    """The type of ``NOW``: ``dag_run_trigger``'s default logical date."""

    def __repr__(self) -> str:
        return "NOW"


#: ``dag_run_trigger(logical_date=NOW)`` (the default): the run is dated now, as the admin,
#: ``/api/v1`` and ``manage.py trigger_dag`` date it; ``logical_date=None`` is Airflow 3's
#: run without a logical date (``/api/v2``, the execution API).
NOW = Now()


@dataclass(frozen=True)
class CreatedTaskInstance:
    task_instance: TaskInstance
    created: bool


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
            "run_type": DagRunType.from_run_id(run_id),
            "state": DagRunState.RUNNING,
            "run_after": now,
            "logical_date": now,
            "data_interval_start": now,
            "data_interval_end": now,
            "start_date": now,
        },
    )
    declared_task = _declared_task(dag_id, task_id)
    plan = dags_task_plans([dag_id]).get((dag_id, task_id), NO_PLAN)
    task_instance, created = TaskInstance.objects.get_or_create(
        dag_id=dag_id,
        run_id=run_id,
        task_id=task_id,
        map_index=map_index,
        defaults={
            "dag_run": dag_run,
            "state": state,
            "max_tries": declared_task.retries if max_tries is None else max_tries,
            "has_downstream": not declared_task.is_leaf,
            "pool": plan.pool,
            "pool_slots": plan.pool_slots,
            "priority_weight": plan.priority_weight,
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


@transaction.atomic
def dag_run_trigger(
    *,
    dag_id: str,
    run_id: str | None = None,
    conf: Mapping[str, Any] | None = None,
    logical_date: datetime | Now | None = NOW,
    data_interval: tuple[datetime, datetime] | None = None,
    run_after: datetime | None = None,
    partition_key: str | None = None,
    triggered_by: DagRunTriggeredBy | None = None,
    triggering_user_name: str | None = None,
    note: str | None = None,
    note_user_id: str | None = None,
    actor: Actor | None = None,
    event: str = "trigger_dag_run",
) -> DagRun:
    """Trigger a run of a declared DAG, as Airflow's ``airflow dags trigger`` and
    ``POST /dags/{dag_id}/dagRuns`` do: a ``manual`` run with ``logical_date`` and data
    interval = ``logical_date`` (default ``NOW``: now), ``run_after`` now, run id
    ``manual__<logical date>`` unless given. ``logical_date=None`` is Airflow 3's run without
    a logical date: logical date and data interval null, run id ``manual__<run_after>``
    (``data_interval``, ``run_after`` and ``partition_key`` as given, if given;
    ``triggered_by`` the face, ``triggering_user_name`` the person, as Airflow 3 records
    them), and one task instance per declared task
    (``max_tries`` = its ``retries``), created by ``admit.dag_runs_insert``: ``running``
    at once with its first tasks ``scheduled`` when the DAG has room (``max_active_runs``),
    else ``queued`` until it has. A paused DAG's run waits ``queued``, as in Airflow, until
    the DAG is unpaused.

    Raises ``DagNotFoundError`` (no such DAG), ``DagStaleError`` (gone from its file),
    ``DagRunExistsError`` (the run id is taken), ``TaskInstanceInputError`` (a bad run id,
    a naive logical date, a conf that is not an object) and ``DagRunConfError`` (the conf does
    not satisfy the DAG's params: a value its schema refuses, a required param missing;
    ``assets_app.params``).

    ``note`` (Airflow's trigger body's): the run's note from the start, written by
    ``note_user_id``.

    ``actor`` (a face acting for someone): recorded as ``event`` (``trigger_dag_run``, or
    ``materialize_asset`` for ``POST /assets/{id}/materialize``); it gives
    ``triggered_by`` (its ``via``) and ``triggering_user_name`` (its name) when those are not.
    """
    if actor is not None:
        triggered_by = triggered_by or actor.triggered_by
        triggering_user_name = triggering_user_name or actor.name
    now = timezone.now()
    if isinstance(logical_date, Now):
        logical_date = now
    elif logical_date is not None and timezone.is_naive(logical_date):
        raise TaskInstanceInputError("logical date must have a timezone (e.g. +00:00)")
    if any(timezone.is_naive(value) for value in (*(data_interval or ()), run_after) if value):
        raise TaskInstanceInputError("data interval and run after must have a timezone")
    checked_text(note, field="note", max_length=NOTE_LENGTH)
    if conf is not None and not isinstance(conf, Mapping):
        raise TaskInstanceInputError(f"conf must be a JSON object, got {type(conf).__name__}")
    if conf is not None and (problem := json_value_problem(conf)) is not None:
        raise TaskInstanceInputError(f"cannot be stored: {problem.describe('conf')}")
    if run_id is None:
        run_id = DagRun.generate_run_id(  # Airflow's timetable run id: ``manual__<run_after>``
            run_type=DagRunType.MANUAL, logical_date=logical_date or run_after or now
        )
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
    params_resolve(dag.params, conf)  # as Airflow does before it creates the run
    if DagRun.objects.filter(dag=dag, run_id=run_id).exists():
        raise DagRunExistsError(
            f"DAG {dag_id!r} has a run {run_id!r} already", dag_id=dag_id, run_id=run_id
        )
    (created,) = dag_runs_insert(
        [
            RunSpec(
                dag_id=dag_id,
                run_id=run_id,
                run_type=DagRunType.MANUAL,
                logical_date=logical_date,
                data_interval_start=data_interval[0] if data_interval else logical_date,
                data_interval_end=data_interval[1] if data_interval else logical_date,
                run_after=run_after or now,
                conf=dict(conf or {}),
                partition_key=partition_key,
                triggered_by=triggered_by,
                triggering_user_name=triggering_user_name,
            )
        ],
        now=now,
    )
    dag_run = DagRun.objects.get(pk=created.dag_run_pk)
    if note is not None:
        DagRunNote.objects.create(dag_run=dag_run, content=note, user_id=note_user_id)
    event_log_record(
        actor,
        event,
        dag_id=dag_id,
        run_id=run_id,
        logical_date=logical_date,
        extra={
            "conf": dict(conf or {}),
            **({} if partition_key is None else {"partition_key": partition_key}),
            **({} if note is None else {"note": note}),
        },
    )
    count = len(created.task_ids)
    transaction.on_commit(
        lambda: logger.info("triggered %s run %s (%d task instance(s))", dag_id, run_id, count)
    )
    return dag_run


def _declared_task(dag_id: str, task_id: str) -> DagTask:
    """The task as its manifest declares it; for a task no manifest declares, the defaults
    (no retries, a leaf)."""
    found = DagTask.objects.filter(dag_id=dag_id, task_id=task_id).first()
    return found if found is not None else DagTask(dag_id=dag_id, task_id=task_id)


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
