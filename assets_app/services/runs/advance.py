"""Deciding a running run's waiting task instances by their trigger rules (Airflow 3.3's
``ti_deps``): its task instances' states follow the DAG's edges.

A task instance starts without a state. In a running run, one whose direct upstreams let its
trigger rule hold becomes ``scheduled`` (for a worker to claim); one that can never run
becomes ``upstream_failed`` or ``skipped`` (:mod:`assets_app.trigger_rules`), which in turn
decides its own downstreams. A task without upstreams is ready at once. A run left with
nothing unfinished then settles (``settle.dag_run_settle``).

Who decides:

- the finishing of a task instance (``state``): right after its commit,
  :func:`dag_run_progress` decides its run's waiting task instances (the **hand-over**: the
  next task is ``scheduled`` and the workers woken without waiting for a scheduler pass) and
  settles the run when nothing is left;
- every scheduler pass: :func:`task_instances_advance` over every running run with waiting
  task instances (a fixed number of statements however many), which also catches what a
  process that died between a commit and its hand-over left behind;
- the admitting of a run (``admit.dag_runs_admit``): its first task instances.

Why the hand-over runs after the commit, not inside it: two upstreams of one task finishing
at once each read the other as still running inside their own transactions, and neither
would schedule the task. Each decides after its own commit instead, so the later of the two
reads both finished (the same argument as ``settle.dag_run_settle``'s), and the ``UPDATE …
WHERE state IS NULL`` makes the task instance change once however many decide it.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Exists, F, OuterRef
from django.utils import timezone

from assets_app.mapping import max_map_length
from assets_app.models import (
    FINISHED_TI_STATES,
    DagRun,
    DagRunState,
    TaskInstance,
    TaskInstanceState,
)
from assets_app.notify import RUNS_CHANNEL, notify
from assets_app.services.runs.mapping import (
    WAIT_FOR_UPSTREAMS,
    Expansion,
    MapLengths,
    RunMapLengths,
    task_instances_expand,
)
from assets_app.services.runs.past import (
    PastCandidate,
    downstream_of,
    task_instances_past_blocked,
)
from assets_app.services.runs.plans import NO_PLAN, TaskPlan, dags_task_plans
from assets_app.services.runs.settle import dag_run_settle
from assets_app.trigger_rules import Decision, UpstreamCounts, trigger_rule_evaluate

#: The most running runs one scheduler pass advances (the rest wait for the next pass).
ADVANCE_LIMIT = 1000

#: A state-less task instance's ``try_number`` is the try it will run as (1 when created, one
#: more after a clear); Airflow counts tries when a task instance is scheduled, so one that is
#: skipped or upstream-failed before it ever was keeps the tries it had (0 for a new one).
NEVER_TRIED = F("try_number") - 1

_DECIDED_STATES = {
    Decision.READY: TaskInstanceState.SCHEDULED,
    Decision.SKIPPED: TaskInstanceState.SKIPPED,
    Decision.UPSTREAM_FAILED: TaskInstanceState.UPSTREAM_FAILED,
}


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
            "pk", "dag_run_id", "dag_id", "task_id", "state", "map_index"
        )
    )
    if not rows:
        return AdvanceResult()
    decided, finished_runs, expansions = _decisions(rows)
    lost = task_instances_expand(expansions)
    if lost:  # another process expanded them first: what was decided over them is its to do
        lost_pks = {pk for expansion in lost for pk in expansion.new_pks}
        lost_runs = {expansion.dag_run_id for expansion in lost}
        decided = {s: [pk for pk in pks if pk not in lost_pks] for s, pks in decided.items()}
        finished_runs = [run_pk for run_pk in finished_runs if run_pk not in lost_runs]
    result = _decisions_write(decided, now=now)
    if result.scheduled:
        notify(RUNS_CHANNEL)  # delivered at once outside a transaction (at commit inside one)
    for run_pk in finished_runs:
        result.runs_settled += dag_run_settle(dag_run_id=run_pk, end_date=now)
    return result


def _decisions(
    rows: Sequence[tuple[uuid.UUID, int, str, str, str | None, int]],
) -> tuple[dict[str, list[uuid.UUID]], list[int], list[Expansion]]:
    """The task instances (``(pk, run pk, dag id, task id, state, map index)``, every one of
    each run) decided, by new state, the runs with nothing unfinished after, and the mapped
    tasks expanded (1 query; 2 more when a mapped task is ready to expand, ``mapping``; up to
    three more when a ready one depends on the past, ``past``: it stays waiting until the
    past is done)."""
    plans = dags_task_plans({row[2] for row in rows})
    by_run: dict[int, list[_Waiting]] = defaultdict(list)
    for pk, run_pk, dag_id, task_id, state, map_index in rows:
        by_run[run_pk].append(
            _Waiting(pk, task_id, state, plans.get((dag_id, task_id), NO_PLAN), dag_id, map_index)
        )
    pushed = MapLengths.of_runs(
        [
            run_pk
            for run_pk, instances in by_run.items()
            if any(i.plan.mapped and i.map_index < 0 and i.state is None for i in instances)
        ]
    )
    decided: dict[str, list[uuid.UUID]] = defaultdict(list)
    finished_runs: list[int] = []
    expansions: list[Expansion] = []
    candidates: list[PastCandidate] = []
    downstream: dict[tuple[str, str], list[str]] | None = None
    for run_pk, instances in by_run.items():
        for instance in _decide(instances, pushed.of_run(run_pk), expansions, run_pk):
            if instance.state == TaskInstanceState.SCHEDULED and instance.plan.depends_on_past:
                dag_id = instance.dag_id
                downstream = downstream if downstream is not None else downstream_of(plans)
                candidates.append(
                    PastCandidate(
                        pk=instance.pk,
                        dag_run_id=run_pk,
                        dag_id=dag_id,
                        task_id=instance.task_id,
                        plan=instance.plan,
                        downstream=tuple(downstream.get((dag_id, instance.task_id), ())),
                    )
                )
            decided[str(instance.state)].append(instance.pk)
        if all(instance.state in FINISHED_TI_STATES for instance in instances):
            finished_runs.append(run_pk)
    blocked = task_instances_past_blocked(candidates)
    if blocked:
        scheduled = decided[TaskInstanceState.SCHEDULED.value]
        decided[TaskInstanceState.SCHEDULED.value] = [pk for pk in scheduled if pk not in blocked]
    return decided, finished_runs, expansions


def _decisions_write(decided: Mapping[str, list[uuid.UUID]], *, now: datetime) -> AdvanceResult:
    """One ``UPDATE`` per new state, each only where the task instance is still state-less
    (another process that decided it first wins; nothing is counted twice). One skipped or
    upstream-failed this way was never tried: its ``try_number`` drops to the tries it had
    (:data:`NEVER_TRIED`)."""
    result = AdvanceResult()
    for state, pks in decided.items():
        changes: dict[str, Any] = {"state": state, "updated_at": now}
        if state != TaskInstanceState.SCHEDULED:
            changes |= {"start_date": now, "end_date": now, "duration": 0.0}
            changes["try_number"] = NEVER_TRIED
        if state == TaskInstanceState.FAILED:  # only a mapped task too wide to expand
            changes["failure_reason"] = (
                f"its expansion has more than MAX_MAP_LENGTH ({max_map_length()}) map indexes"
            )
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
    dag_id: str = ""
    map_index: int = -1


def _decide(
    instances: list[_Waiting],
    pushed: RunMapLengths,
    expansions: list[Expansion],
    run_pk: int,
) -> Iterable[_Waiting]:
    """Decide a run's state-less task instances, in memory, until nothing changes (a skip or
    an upstream failure decides the task instances after it in the same pass); yields each
    one decided, with its new state. A mapped task's unexpanded instance whose rule holds is
    expanded (added to ``expansions``; its map indexes join ``instances`` and are decided in
    the same pass), or skipped when it maps over nothing, as Airflow does."""
    by_task: dict[str, list[_Waiting]] = defaultdict(list)
    for instance in instances:
        by_task[instance.task_id].append(instance)
    changed = True
    while changed:
        changed = False
        for instance in list(instances):
            if instance.state is not None:
                continue
            decision = trigger_rule_evaluate(
                rule=instance.plan.trigger_rule, counts=_upstream_counts(instance, by_task)
            )
            if decision is Decision.WAIT:
                continue
            if decision is Decision.READY and instance.plan.mapped and instance.map_index < 0:
                outcome = pushed.expansion_length(instance.plan.mapped["length"], by_task)
                if outcome is WAIT_FOR_UPSTREAMS:
                    continue
                if isinstance(outcome, int) and outcome > 0:
                    expanded = _expand(instance, outcome, run_pk)
                    expansions.append(expanded)
                    by_task[instance.task_id] = expanded.instances
                    instances.extend(expanded.instances[1:])
                    changed = True
                    continue
                instance.state = str(outcome)  # skipped, upstream_failed or failed
                changed = True
                yield instance
                continue
            instance.state = _DECIDED_STATES[decision].value
            changed = changed or decision is not Decision.READY
            yield instance


def _expand(instance: _Waiting, length: int, run_pk: int) -> Expansion:
    """A mapped task's unexpanded instance as its ``length`` map indexes: it becomes map
    index 0 (keeping its id), the others new."""
    instance.map_index = 0
    others = [
        _Waiting(uuid.uuid4(), instance.task_id, None, instance.plan, instance.dag_id, index)
        for index in range(1, length)
    ]
    return Expansion(
        dag_run_id=run_pk,
        pk=instance.pk,
        new_pks=[other.pk for other in others],
        instances=[instance, *others],
    )


def _upstream_counts(instance: _Waiting, by_task: Mapping[str, list[_Waiting]]) -> UpstreamCounts:
    """Its direct upstreams' states, counted per task instance (a mapped upstream counts each
    of its map indexes, as Airflow counts them); an upstream with no task instance in the run
    (a task added since) counts as ``removed``, as Airflow counts it. In a mapped task group,
    a map index depends on the same map index of the group's other tasks; the group's
    unexpanded instance does not wait for them (it expands as soon as its length is known)."""
    counts: dict[str, int] = defaultdict(int)
    total = 0
    group = instance.plan.map_group
    for task_id in instance.plan.upstream:
        upstreams = by_task.get(task_id)
        if upstreams is None:
            total += 1
            counts[TaskInstanceState.REMOVED.value] += 1
            continue
        if group is not None and upstreams[0].plan.map_group == group:
            if instance.map_index < 0:
                continue
            upstreams = [u for u in upstreams if u.map_index in (instance.map_index, -1)]
        total += len(upstreams)
        for upstream in upstreams:
            if upstream.state in _COUNTED:
                counts[str(upstream.state)] += 1
    return UpstreamCounts(upstream=total, **counts)


#: The upstream states a trigger rule counts: the finished ones.
_COUNTED = frozenset(state.value for state in FINISHED_TI_STATES)
