"""``depends_on_past``, ``wait_for_downstream`` and ``ignore_first_depends_on_past`` (Airflow
3.3's ``PrevDagrunDep``): a task instance whose task depends on the past becomes
``scheduled`` only once the same task in its DAG's **previous run** succeeded or was skipped
(with ``wait_for_downstream``, that task instance's direct downstreams too). Until then it
stays without a state, as in Airflow, and its page says what it waits for
(:func:`task_instance_past_wait`).

The previous run is the DAG's run with the latest logical date before this run's (for a DAG
with ``catchup``, its latest *scheduled* run before it), as Airflow's
``DagRun.get_previous_dagrun``. A run without a logical date (asset-triggered) has none, and
neither has the first run: their task instances pass. When the previous run has no task
instance of the task (a task added since), ``ignore_first_depends_on_past`` (Airflow 3's
default) lets it pass if no earlier run ever had one.

``advance`` asks :func:`task_instances_past_blocked` of the task instances its trigger rules
made ready: at most three statements however many, none when no task depends on the past.
The scheduler's full pass asks again every interval, so a previous try that ends, is marked,
or is cleared and succeeds releases the waiting one within a pass.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Min, OuterRef, Q, Subquery

from assets_app.models import DagRun, DagRunType, TaskInstance, TaskInstanceState
from assets_app.services.runs.plans import TaskPlan, dags_task_plans

#: What the previous try may have ended as (Airflow's ``_SUCCESSFUL_STATES``).
PAST_DONE_STATES = frozenset({TaskInstanceState.SUCCESS.value, TaskInstanceState.SKIPPED.value})


@dataclass(frozen=True)
class PastCandidate:
    """A task instance that its trigger rule lets run, whose task depends on the past."""

    pk: uuid.UUID
    dag_run_id: int
    dag_id: str
    task_id: str
    plan: TaskPlan
    #: the task's direct downstreams (what ``wait_for_downstream`` waits for too)
    downstream: tuple[str, ...] = ()


def downstream_of(plans: Mapping[tuple[str, str], TaskPlan]) -> dict[tuple[str, str], list[str]]:
    """``(dag_id, task_id)`` → the tasks that depend on it directly."""
    found: dict[tuple[str, str], list[str]] = defaultdict(list)
    for (dag_id, task_id), plan in plans.items():
        for up in plan.upstream:
            found[dag_id, up].append(task_id)
    return found


def task_instances_past_blocked(candidates: Sequence[PastCandidate]) -> dict[uuid.UUID, str]:
    """The candidates that must still wait, each with why (Airflow's reasons). Three
    statements at most, whatever their number; none without candidates."""
    if not candidates:
        return {}
    run_pks = {candidate.dag_run_id for candidate in candidates}
    previous_runs = DagRun.objects.filter(
        dag_id=OuterRef("dag_id"), logical_date__lt=OuterRef("logical_date")
    ).filter(Q(dag__catchup=False) | Q(run_type=DagRunType.SCHEDULED))
    latest = previous_runs.order_by("-logical_date", "-pk")
    runs: dict[int, tuple[datetime | None, int | None]] = {}
    previous_ids: dict[int, str] = {}
    for pk, logical_date, previous, previous_id in (
        DagRun.objects.filter(pk__in=run_pks)
        .annotate(
            previous=Subquery(latest.values("pk")[:1]),
            previous_id=Subquery(latest.values("run_id")[:1]),
        )
        .values_list("pk", "logical_date", "previous", "previous_id")
    ):
        runs[pk] = (logical_date, previous)
        if previous is not None:
            previous_ids[previous] = previous_id
    wanted = {
        task_id
        for candidate in candidates
        for task_id in (candidate.task_id, *candidate.downstream)
    }
    previous_pks = {previous for _, previous in runs.values() if previous is not None}
    past: dict[int, dict[str, list[str | None]]] = defaultdict(lambda: defaultdict(list))
    if previous_pks:
        for run_pk, task_id, state in TaskInstance.objects.filter(
            dag_run_id__in=previous_pks, task_id__in=wanted
        ).values_list("dag_run_id", "task_id", "state"):
            past[run_pk][task_id].append(state)
    blocked: dict[uuid.UUID, str] = {}
    never_tried: list[tuple[PastCandidate, datetime]] = []
    for candidate in candidates:
        logical_date, previous = runs.get(candidate.dag_run_id, (None, None))
        if previous is None:
            continue  # the first run, or one without a logical date
        states = past[previous].get(candidate.task_id)
        if states is None:
            if candidate.plan.ignore_first_depends_on_past:
                assert logical_date is not None  # noqa: S101 - a previous run needs one
                never_tried.append((candidate, logical_date))
            else:
                blocked[candidate.pk] = f"{NOT_RUN_YET} (run {previous_ids[previous]})"
            continue
        undone = sum(1 for state in states if state not in PAST_DONE_STATES)
        if undone:
            blocked[candidate.pk] = (
                f"depends_on_past is true for this task, but {undone} previous task "
                f"instance(s) are not in a successful state ({_states(states)} in run "
                f"{previous_ids[previous]})"
            )
            continue
        if candidate.plan.wait_for_downstream and any(
            state not in PAST_DONE_STATES
            for task_id in candidate.downstream
            for state in past[previous].get(task_id, [])
        ):
            blocked[candidate.pk] = (
                "The tasks downstream of the previous task instance(s) haven't completed, and "
                f"wait_for_downstream is True (run {previous_ids[previous]})"
            )
    blocked.update(_tried_before(never_tried))
    return blocked


NOT_RUN_YET = (
    "depends_on_past is true for this task's DAG, but the previous task instance has not run yet."
)


def _states(states: Collection[str | None]) -> str:
    return ", ".join(sorted(str(state or "no state") for state in states))


def _tried_before(never_tried: Sequence[tuple[PastCandidate, datetime]]) -> dict[uuid.UUID, str]:
    """Of candidates whose previous run has no task instance of the task, those an earlier run
    did have one of (``ignore_first_depends_on_past`` lets the others pass). One query."""
    if not never_tried:
        return {}
    firsts = {
        (dag_id, task_id): first
        for dag_id, task_id, first in TaskInstance.objects.filter(
            dag_id__in={c.dag_id for c, _ in never_tried},
            task_id__in={c.task_id for c, _ in never_tried},
        )
        .values("dag_id", "task_id")
        .annotate(first=Min("dag_run__logical_date"))
        .values_list("dag_id", "task_id", "first")
    }
    return {
        candidate.pk: NOT_RUN_YET
        for candidate, logical_date in never_tried
        if (first := firsts.get((candidate.dag_id, candidate.task_id))) is not None
        and first < logical_date
    }


def task_instance_past_wait(task_instance: TaskInstance) -> str:
    """What a task instance without a state waits for in the past, as its page says it; ""
    when it waits for nothing there (its task does not depend on the past, or the past is
    done)."""
    if task_instance.state is not None:
        return ""
    plans = dags_task_plans([task_instance.dag_id])
    plan = plans.get((task_instance.dag_id, task_instance.task_id))
    if plan is None or not plan.depends_on_past:
        return ""
    candidate = PastCandidate(
        pk=task_instance.pk,
        dag_run_id=task_instance.dag_run_id,
        dag_id=task_instance.dag_id,
        task_id=task_instance.task_id,
        plan=plan,
        downstream=tuple(
            downstream_of(plans).get((task_instance.dag_id, task_instance.task_id), ())
        ),
    )
    return task_instances_past_blocked([candidate]).get(task_instance.pk, "")
