"""Clearing task instances (Airflow's "clear"): finished ones run again, as a new try.

One use case for ``manage.py clear_task_instances``, the admin's clear actions (and, later,
the operator API). In one transaction, with the task instances and their runs locked:

- a selection holding a ``running`` task instance is refused as a whole
  (``TaskInstanceClearRefusedError``) and nothing is written;
- each finished (or ``up_for_retry``) task instance has its try kept in
  ``TaskInstanceHistory`` (an ``up_for_retry`` one's already is), gets a new id and loses its
  state (as Airflow's clear), with ``try_number + 1``; ``max_tries`` becomes the old
  ``try_number`` + the task's declared ``retries`` (Airflow's ``clear_task_instances``), so
  it gets its retries again; without a declared task, ``max(max_tries, try_number)``; its
  ``pool``, ``pool_slots`` and ``priority_weight`` become the task's as declared now;
- other task instances (scheduled, queued, deferred …) are left alone: they will run anyway;
- each finished or running run of a cleared task instance goes back to ``queued`` (no start or
  end date), as Airflow's clear.

After the commit the runs are admitted again (``admit.dag_runs_admit``: at once when the
DAG has room) and their cleared task instances decided by their trigger rules, so a cleared
task runs again after its upstreams, and a cleared upstream runs before its downstreams.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from assets_app.exceptions import (
    DagRunNotFoundError,
    NotFoundError,
    TaskInstanceClearRefusedError,
)
from assets_app.models import (
    FAILED_TI_STATES,
    FINISHED_RUN_STATES,
    FINISHED_TI_STATES,
    Dag,
    DagRun,
    DagRunState,
    TaskInstance,
    TaskInstanceHistory,
    TaskInstanceState,
)
from assets_app.services.audit import Actor, event_log_record
from assets_app.services.runs.admit import dag_runs_admit
from assets_app.services.runs.plans import NO_PLAN, TaskPlan, dags_task_plans
from assets_app.services.runs.tries import task_instance_history_record, task_instance_renew

logger = logging.getLogger(__name__)

CLEARABLE_STATES = FINISHED_TI_STATES | {TaskInstanceState.UP_FOR_RETRY}
#: Runs that go back to ``queued`` when one of their task instances is cleared (Airflow sets
#: every affected run ``queued``): finished ones, and running ones too, so that a running
#: run's settle that read the task instances before the clear committed cannot end it (see
#: ``dag_run_settle``).
REQUEUED_RUN_STATES = (*FINISHED_RUN_STATES, DagRunState.RUNNING)
#: at most this many refused task instances are named in the error
NAMED_IN_ERROR = 5


@dataclass(frozen=True)
class ClearedTaskInstance:
    label: str  # dag.task[map] @ run
    previous_state: str | None
    try_number: int  # of the new try
    max_tries: int
    task_instance_id: uuid.UUID  # the new try's id (the current one in a dry run)


@dataclass
class ClearResult:
    dry_run: bool
    cleared: list[ClearedTaskInstance] = field(default_factory=list)
    left_alone: list[tuple[str, str | None]] = field(default_factory=list)  # (label, state)
    runs_requeued: list[str] = field(default_factory=list)  # dag / run


def clear_command_hint(ti: TaskInstance) -> str:
    """How to run a finished task instance again."""
    map_index = f" --map-index {ti.map_index}" if ti.map_index >= 0 else ""
    return (
        f"manage.py clear_task_instances --dag-id {ti.dag_id} --run-id {ti.run_id} "
        f"--task-id {ti.task_id}{map_index}"
    )


def task_instances_select(
    *,
    dag_id: str,
    run_id: str | None = None,
    task_id: str | None = None,
    only_failed: bool = False,
    map_index: int | None = None,
) -> QuerySet[TaskInstance]:
    """The task instances of a DAG (of one run, one task, one map index of a mapped task,
    failed only) to clear.

    An unknown DAG or run raises ``NotFoundError``.
    """
    if not Dag.objects.filter(dag_id=dag_id).exists():
        raise NotFoundError(f"no DAG {dag_id!r}")
    selected = TaskInstance.objects.filter(dag_id=dag_id)
    if run_id is not None:
        if not DagRun.objects.filter(dag_id=dag_id, run_id=run_id).exists():
            raise DagRunNotFoundError(f"DAG {dag_id!r} has no run {run_id!r}")
        selected = selected.filter(run_id=run_id)
    if task_id is not None:
        selected = selected.filter(task_id=task_id)
    if map_index is not None:
        selected = selected.filter(map_index=map_index)
    if only_failed:
        selected = selected.filter(state__in=FAILED_TI_STATES)
    return selected


def task_instances_clear(
    *,
    task_instances: QuerySet[TaskInstance],
    dry_run: bool = False,
    actor: Actor | None = None,
    event: str = "post_clear_task_instances",
    dag_id: str | None = None,
    run_id: str | None = None,
    task_id: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> ClearResult:
    """Clear the selected task instances (see the module's docstring).

    ``actor``: recorded as ``event`` (``post_clear_task_instances``, or ``clear_dag_run`` for
    a run's clear) with ``dag_id``, ``run_id``, ``task_id`` and ``extra`` as the caller's
    request named them; a dry run records nothing, as in Airflow."""
    result = ClearResult(dry_run=dry_run)
    with transaction.atomic():
        locked = list(
            TaskInstance.objects.select_for_update(of=("self", "dag_run"))
            .select_related("dag_run")
            .filter(pk__in=task_instances.values("pk"))
            .order_by("dag_id", "run_id", "task_id", "map_index")
        )
        running = [ti for ti in locked if ti.state == TaskInstanceState.RUNNING]
        if running:
            named = ", ".join(ti.task_label for ti in running[:NAMED_IN_ERROR])
            more = (
                f" and {len(running) - NAMED_IN_ERROR} more"
                if len(running) > NAMED_IN_ERROR
                else ""
            )
            raise TaskInstanceClearRefusedError(
                f"cannot clear running task instance(s): {named}{more}; wait until they finish "
                "(or are reaped), or narrow the selection (--task-id, --only-failed)",
                running=[str(ti.pk) for ti in running],
            )
        to_clear = [ti for ti in locked if ti.state in CLEARABLE_STATES]
        result.left_alone = [(ti.task_label, ti.state) for ti in locked if ti not in to_clear]
        declared = dags_task_plans({ti.dag_id for ti in to_clear})
        for ti in to_clear:
            plan = declared.get((ti.dag_id, ti.task_id))
            max_tries = (
                ti.try_number + plan.retries
                if plan is not None
                else max(ti.max_tries, ti.try_number)
            )
            result.cleared.append(
                ClearedTaskInstance(
                    label=ti.task_label,
                    previous_state=ti.state,
                    try_number=ti.try_number + 1,
                    max_tries=max_tries,
                    task_instance_id=ti.pk if dry_run else uuid.uuid4(),
                )
            )
        runs = {ti.dag_run_id: ti.dag_run for ti in to_clear}
        result.runs_requeued = [
            str(run) for run in runs.values() if run.state in REQUEUED_RUN_STATES
        ]
        if not dry_run:
            # a clear across DAGs (the admin's selection) is one row per DAG, as a pause is
            dag_ids: list[str | None] = (
                [dag_id] if dag_id else [*sorted({ti.dag_id for ti in locked})] or [None]
            )
            for one_dag in dag_ids:
                event_log_record(
                    actor,
                    event,
                    dag_id=one_dag,
                    run_id=run_id,
                    task_id=task_id,
                    extra={**(extra or {}), "dry_run": False},
                )
        if dry_run or not to_clear:
            return result
        _write(to_clear, result.cleared, run_ids=list(runs), plans=declared)
    dag_runs_admit(dag_ids={run.dag_id for run in runs.values()})
    logger.info(
        "cleared %s task instance(s); %s run(s) back to queued",
        len(result.cleared),
        len(result.runs_requeued),
    )
    return result


def _write(
    task_instances: list[TaskInstance],
    cleared: list[ClearedTaskInstance],
    *,
    run_ids: list[int],
    plans: Mapping[tuple[str, str], TaskPlan],
) -> None:
    now = timezone.now()
    # an up_for_retry task instance's try is in the history already (since it failed)
    TaskInstanceHistory.objects.bulk_create(
        [
            task_instance_history_record(ti)
            for ti in task_instances
            if ti.state != TaskInstanceState.UP_FOR_RETRY
        ]
    )
    for ti, new in zip(task_instances, cleared, strict=True):
        # the task as declared now, as Airflow's clear refreshes it (its pool and priority)
        plan = plans.get((ti.dag_id, ti.task_id), NO_PLAN)
        task_instance_renew(
            ti,
            new_id=new.task_instance_id,
            state=None,
            now=now,
            try_number=new.try_number,
            max_tries=new.max_tries,
            start_date=None,
            end_date=None,
            duration=None,
            next_retry_at=None,
            failure_reason="",
            pool=plan.pool,
            pool_slots=plan.pool_slots,
            priority_weight=plan.priority_weight,
        )
    DagRun.objects.filter(pk__in=run_ids, state__in=REQUEUED_RUN_STATES).update(
        state=DagRunState.QUEUED, start_date=None, end_date=None
    )
