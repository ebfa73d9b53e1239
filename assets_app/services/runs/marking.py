"""Marking a DAG run (Airflow's ``PATCH /dags/{dag_id}/dagRuns/{dag_run_id}``: "mark success",
"mark failed", "mark queued") and writing its note, as ``airflow/api/common/mark_tasks.py``
does:

- **success / failed**: the run's task instances that are running (``running``, ``deferred``,
  ``up_for_reschedule``: Airflow's ``running_states``) get that state; those not yet finished
  (``scheduled``, ``queued``, ``up_for_retry`` …) are ``skipped``; finished ones keep theirs.
  Each changed one gets a start date (if it had none), an end date and a duration, as
  Airflow's ``TaskInstance.set_state``. The run takes the state and, if it changed, an end
  date of now (``DagRun.set_state``). No asset events are recorded: marking is no task run.
- **queued**: the run becomes ``queued`` with no start or end date; its task instances are
  left alone. As after a clear, it is then admitted again (``admit.dag_runs_admit``,
  after the commit: at once when its DAG is unpaused and has room, else by a later scheduler
  pass, as Airflow's scheduler does): ``running``, its waiting task instances decided, and
  settled at once if none is unfinished, ending as its task instances say. No run is left
  waiting for ever.

One transaction per call, with the run's task instances and then the run locked (the order
of clearing and of a task instance's start), so a runner's report on a task instance waits
and then finds it no longer running: its finish is refused (or unchanged) and its heartbeat
answers 409, which stops the task.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from datetime import datetime

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from assets_app.exceptions import DagRunNotFoundError, InvalidInputError
from assets_app.models import (
    FINISHED_RUN_STATES,
    FINISHED_TI_STATES,
    NOTE_LENGTH,
    DagRun,
    DagRunNote,
    DagRunState,
    TaskInstance,
    TaskInstanceState,
)
from assets_app.services.audit import Actor, event_log_record
from assets_app.services.inputs import KEEP, Keep, checked_text
from assets_app.services.runs.admit import dag_runs_admit
from assets_app.services.runs.advance import task_instances_advance
from assets_app.services.runs.clearing import task_instances_clear
from assets_app.services.runs.past import downstream_of
from assets_app.services.runs.plans import dags_task_plans

logger = logging.getLogger(__name__)

#: The states a run may be marked with (Airflow's ``DagRunMutableStates``).
MARKABLE_RUN_STATES = (DagRunState.QUEUED, DagRunState.SUCCESS, DagRunState.FAILED)
#: Airflow's ``running_states`` of ``_set_dag_run_terminal_state`` (the registry has no
#: ``awaiting_input``): these take the run's new state; other unfinished ones are skipped.
RUNNING_TI_STATES = frozenset(
    {TaskInstanceState.RUNNING, TaskInstanceState.DEFERRED, TaskInstanceState.UP_FOR_RESCHEDULE}
)


@dataclass(frozen=True)
class MarkedTaskInstance:
    label: str  # dag.task[map] @ run
    previous_state: str | None
    state: str


@dataclass
class MarkResult:
    dag_run: DagRun
    task_instances: list[MarkedTaskInstance] = field(default_factory=list)


def dag_run_mark(
    *,
    dag_id: str,
    run_id: str,
    state: str | None = None,
    note: str | Keep | None = KEEP,
    user_id: str | None = None,
    actor: Actor | None = None,
) -> MarkResult:
    """Mark the run ``state`` (one of ``MARKABLE_RUN_STATES``; ``None``: leave it) and/or set
    its ``note`` (``KEEP``: leave it; ``None`` clears it), written by ``user_id``; the note
    first, as Airflow's route. See the module's docstring for what each state does.

    ``actor``: recorded as ``patch_dag_run`` (Airflow's event for a run's state or note).

    Raises ``DagRunNotFoundError`` and ``InvalidInputError`` (naming ``state`` or ``note``).
    """
    if state is not None and state not in MARKABLE_RUN_STATES:
        allowed = ", ".join(s.value for s in MARKABLE_RUN_STATES)
        raise InvalidInputError(f"state must be one of {allowed}, got {state!r}", field="state")
    if not isinstance(note, Keep):
        checked_text(note, field="note", max_length=NOTE_LENGTH)
    with transaction.atomic():
        dag_run, task_instances = _lock(dag_id=dag_id, run_id=run_id)
        result = MarkResult(dag_run=dag_run)
        if not isinstance(note, Keep):
            _note_set(dag_run, note=note, user_id=user_id)
        now = timezone.now()
        if state in FINISHED_RUN_STATES:
            result.task_instances = _finish(dag_run, task_instances, state=state, now=now)
        elif state == DagRunState.QUEUED:
            _requeue(dag_run)
        marked = [(t.label, t.state) for t in result.task_instances]
        event_log_record(
            actor,
            "patch_dag_run",
            dag_id=dag_id,
            run_id=run_id,
            logical_date=dag_run.logical_date,
            extra={
                **({"state": state} if state is not None else {}),
                **({} if isinstance(note, Keep) else {"note": note}),
            },
        )
        transaction.on_commit(
            lambda: logger.info(
                "DAG run %s marked %s; task instances: %s", dag_run, state or "(note)", marked
            )
        )
    if state == DagRunState.QUEUED:
        dag_runs_admit(dag_ids=[dag_id])
    dag_run.refresh_from_db()
    return result


def _lock(*, dag_id: str, run_id: str) -> tuple[DagRun, list[TaskInstance]]:
    """The run's task instances, then the run, locked (call inside ``transaction.atomic``)."""
    pk = DagRun.objects.filter(dag_id=dag_id, run_id=run_id).values_list("pk", flat=True).first()
    if pk is None:
        raise DagRunNotFoundError(f"DAG {dag_id!r} has no run {run_id!r}")
    task_instances = list(
        TaskInstance.objects.select_for_update(of=("self",))
        .filter(dag_run_id=pk)
        .order_by("dag_id", "run_id", "task_id", "map_index")
    )
    dag_run = DagRun.objects.select_for_update(of=("self",)).get(pk=pk)
    return dag_run, task_instances


def _note_set(dag_run: DagRun, *, note: str | None, user_id: str | None) -> None:
    DagRunNote.objects.update_or_create(
        dag_run=dag_run, defaults={"content": note, "user_id": user_id}
    )


def _finish(
    dag_run: DagRun, task_instances: list[TaskInstance], *, state: str, now: datetime
) -> list[MarkedTaskInstance]:
    marked, changed = [], []
    for ti in task_instances:
        if ti.state in FINISHED_TI_STATES:
            continue
        new = state if ti.state in RUNNING_TI_STATES else TaskInstanceState.SKIPPED
        marked.append(MarkedTaskInstance(label=ti.task_label, previous_state=ti.state, state=new))
        ti.state = new
        ti.start_date = ti.start_date or now
        ti.end_date = ti.end_date or now
        ti.duration = (ti.end_date - ti.start_date).total_seconds()
        ti.next_retry_at = None
        ti.updated_at = now  # bulk_update does not apply auto_now
        changed.append(ti)
    TaskInstance.objects.bulk_update(
        changed,
        ["state", "start_date", "end_date", "duration", "next_retry_at", "updated_at"],
    )
    if dag_run.state != state:
        dag_run.state, dag_run.end_date = state, now
        dag_run.save(update_fields=["state", "end_date"])
    return marked


def _requeue(dag_run: DagRun) -> None:
    """Airflow's ``DagRun.set_state(QUEUED)``: no start or end date (its task instances are
    left alone); the caller admits it after the commit."""
    if dag_run.state == DagRunState.QUEUED:
        return
    dag_run.state, dag_run.start_date, dag_run.end_date = DagRunState.QUEUED, None, None
    dag_run.save(update_fields=["state", "start_date", "end_date"])


# --- a task instance ---------------------------------------------------------------------------

#: The states a task instance may be marked with (Airflow's ``PatchTaskInstanceBody``).
MARKABLE_TI_STATES = (
    TaskInstanceState.SUCCESS,
    TaskInstanceState.FAILED,
    TaskInstanceState.SKIPPED,
)


@dataclass
class TaskInstancesMarkResult:
    """What :func:`task_instances_mark` changed: the task instances marked, and the failed or
    upstream-failed task instances downstream of them cleared (``clearing``) to run again."""

    marked: list[MarkedTaskInstance] = field(default_factory=list)
    cleared: list[str] = field(default_factory=list)


def task_instances_mark(
    *,
    task_instances: QuerySet[TaskInstance],
    state: str,
    actor: Actor | None = None,
) -> TaskInstancesMarkResult:
    """Airflow's "mark success / failed / skipped" of task instances (one, or one map index of
    a mapped task; ``DAG.set_task_instance_state``): each selected task instance not already
    in ``state`` takes it, with a start date (if it had none), an end date of now and a
    duration; a running one's runner then finds it no longer running (its heartbeat answers
    409, which stops the task). Then, as Airflow, the failed and upstream-failed task
    instances downstream of them in their runs are cleared (a finished run goes back to
    ``queued``), and each running run decides its waiting task instances and settles. No
    asset events are recorded: marking is no task run. One transaction."""
    if state not in MARKABLE_TI_STATES:
        raise InvalidInputError(
            f"state: a task instance can be marked {', '.join(MARKABLE_TI_STATES)}, not {state!r}"
        )
    result = TaskInstancesMarkResult()
    now = timezone.now()
    with transaction.atomic():
        locked = list(
            TaskInstance.objects.select_for_update()
            .filter(pk__in=task_instances.values("pk"))
            .order_by("dag_id", "run_id", "task_id", "map_index")
        )
        changed = [ti for ti in locked if ti.state != state]
        for ti in changed:
            result.marked.append(MarkedTaskInstance(ti.task_label, ti.state, state))
            ti.start_date = ti.start_date or now
            ti.state, ti.end_date = state, now
            ti.duration = (now - ti.start_date).total_seconds()
            ti.save(update_fields=["state", "start_date", "end_date", "duration", "updated_at"])
        for ti in changed[:1]:
            event_log_record(
                actor,
                "patch_task_instance",
                dag_id=ti.dag_id,
                run_id=ti.run_id,
                task_id=ti.task_id,
                map_index=ti.map_index,
                extra={"new_state": state, "task_instances": [m.label for m in result.marked]},
            )
        downstream = _failed_downstream(changed)
        if downstream:
            cleared = task_instances_clear(
                task_instances=TaskInstance.objects.filter(pk__in=downstream)
            )
            result.cleared = [c.label for c in cleared.cleared]
        running = sorted(
            {ti.dag_run_id for ti in changed}
            & set(
                DagRun.objects.filter(
                    pk__in={ti.dag_run_id for ti in changed}, state=DagRunState.RUNNING
                ).values_list("pk", flat=True)
            )
        )
    if running:  # after the commit, as every hand-over (advance's docstring)
        task_instances_advance(dag_run_ids=running, now=now)
    logger.info("marked %d task instance(s) %s", len(result.marked), state)
    return result


def _failed_downstream(marked: list[TaskInstance]) -> list[uuid.UUID]:
    """The failed and upstream-failed task instances downstream (transitively) of the marked
    ones in their runs, not themselves marked (2 queries; none without marked ones)."""
    if not marked:
        return []
    plans = dags_task_plans({ti.dag_id for ti in marked})
    below = downstream_of(plans)
    wanted: dict[int, set[str]] = {}
    for ti in marked:
        found = wanted.setdefault(ti.dag_run_id, set())
        stack = list(below.get((ti.dag_id, ti.task_id), ()))
        while stack:
            task_id = stack.pop()
            if task_id not in found:
                found.add(task_id)
                stack.extend(below.get((ti.dag_id, task_id), ()))
    marked_pks = {ti.pk for ti in marked}
    rows = TaskInstance.objects.filter(
        dag_run_id__in=list(wanted),
        state__in=[TaskInstanceState.FAILED, TaskInstanceState.UPSTREAM_FAILED],
    ).values_list("pk", "dag_run_id", "task_id")
    return [
        pk for pk, run_pk, task_id in rows if task_id in wanted[run_pk] and pk not in marked_pks
    ]
