"""Deferred task instances and their triggers (Airflow's ``airflow/models/trigger.py`` and
the triggerer's side of ``triggerer_job_runner.py``; docs/triggerer.md).

A running task instance that defers stores a ``Trigger`` and goes ``deferred``
(``state._defer``). From there:

- **claiming** (:func:`triggers_claim`): each ``manage.py triggerer`` registers a
  ``Triggerer`` row and heartbeats it; a pass frees the triggers of triggerers whose heartbeat
  is older than ``TRIGGERER_HEALTH_CHECK_THRESHOLD`` (or that stopped), then claims unclaimed
  triggers up to its capacity, ``SELECT … FOR UPDATE SKIP LOCKED`` on PostgreSQL (on SQLite
  the ``BEGIN IMMEDIATE`` transaction serializes claimers), so each trigger is in exactly one
  triggerer;
- **an event** (:func:`trigger_event_submit`): the task instances deferred on the trigger go
  back to ``scheduled`` with their ``next_method`` and ``next_kwargs`` plus the event's
  payload as ``event`` (Airflow's ``handle_event_submit``), for a worker to run again; the
  trigger is deleted. Under the task instances' locks and only while they are ``deferred`` on
  that trigger, so an event fired twice (two triggerers, one thought dead) resumes once;
- **a failure** (:func:`trigger_failure_submit`): scheduled with ``next_method="__fail__"``
  and the error, which the SDK's ``resume_execution`` turns into ``TaskDeferralError``;
- **a timeout** (:func:`task_instances_deferral_timeout`, every scheduler and triggerer
  pass): a deferred task instance past its ``trigger_timeout`` is scheduled with
  ``__fail__`` / ``Trigger timeout``, which the SDK raises as ``TaskDeferralTimeout``,
  whether or not a triggerer runs;
- **starting in the triggerer** (:func:`task_instances_start_in_triggerer`, every scheduler
  and triggerer pass): a ``scheduled`` task instance of a task with ``start_trigger_args``
  (Airflow's ``start_from_trigger``) that has not run yet goes ``deferred`` with a trigger
  from them (Airflow's ``TaskInstance.defer_task``); workers never claim it before (``claims``);
- **unused triggers** (:func:`triggers_clean`): a trigger no deferred task instance waits on
  any more (marked, cleared, timed out) is deleted; the triggerer running it cancels it.

An asset watcher's trigger (``services.runs.watchers``) is in use while an asset watches
with it: it is claimed, held and moved as these are, never cleaned, and deleted when its
watcher stops.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from assets_app.models import (
    AssetWatcher,
    DagTask,
    TaskInstance,
    TaskInstanceState,
    Trigger,
    Triggerer,
    XCom,
)
from assets_app.notify import RUNS_CHANNEL, TRIGGERS_CHANNEL, notify
from assets_app.services.runs.callbacks import task_callback_request

logger = logging.getLogger(__name__)

#: ``next_method`` of a task instance scheduled only to fail (Airflow's ``TRIGGER_FAIL_REPR``)
TRIGGER_FAIL_REPR = "__fail__"
#: ``next_kwargs["error"]`` values the SDK reads (Airflow's ``TriggerFailureReason``)
TRIGGER_TIMEOUT = "Trigger timeout"
TRIGGER_FAILURE = "Trigger failure"


# --- triggerers -----------------------------------------------------------------------------


def health_cutoff(now: datetime) -> datetime:
    """A triggerer whose heartbeat is older than this is dead."""
    return now - timedelta(seconds=float(settings.TRIGGERER_HEALTH_CHECK_THRESHOLD))


def triggerer_register(*, hostname: str, pid: int, capacity: int) -> Triggerer:
    """A new triggerer process's row (alive from now while it heartbeats)."""
    now = timezone.now()
    return Triggerer.objects.create(
        hostname=hostname, pid=pid, capacity=capacity, started_at=now, heartbeat=now
    )


def triggerer_heartbeat(*, triggerer_id: int) -> None:
    """The triggerer is alive now. One ``UPDATE``."""
    Triggerer.objects.filter(pk=triggerer_id).update(heartbeat=timezone.now())


def triggerer_end(*, triggerer_id: int) -> int:
    """A triggerer stopping cleanly: it ends now and hands its triggers back at once (another
    triggerer claims them at its next pass, not after the health threshold). Returns how
    many it handed back."""
    with transaction.atomic():
        Triggerer.objects.filter(pk=triggerer_id).update(ended_at=timezone.now())
        return Trigger.objects.filter(triggerer_id=triggerer_id).update(triggerer=None)


def triggerers_alive(*, now: datetime | None = None) -> list[Triggerer]:
    """The triggerers alive now (heartbeat within the threshold, not ended), newest first."""
    now = now or timezone.now()
    return list(
        Triggerer.objects.filter(heartbeat__gte=health_cutoff(now), ended_at__isnull=True).order_by(
            "-heartbeat"
        )
    )


# --- claiming ---------------------------------------------------------------------------------


def _waited_on() -> Q:
    """A trigger in use: a deferred task instance waits on it, or an asset watches with it
    (``services.runs.watchers``)."""
    return Q(
        Exists(
            TaskInstance.objects.filter(trigger_id=OuterRef("pk"), state=TaskInstanceState.DEFERRED)
        )
    ) | Q(Exists(AssetWatcher.objects.filter(trigger_id=OuterRef("pk"))))


@dataclass(frozen=True)
class ClaimResult:
    released: int  # triggers taken from dead triggerers (by any claimer)
    claimed: int  # triggers this triggerer claimed now


def triggers_claim(*, triggerer_id: int, capacity: int, now: datetime | None = None) -> ClaimResult:
    """Free the triggers of dead triggerers, then claim unclaimed triggers with a deferred
    task instance waiting, oldest first, until this triggerer holds ``capacity`` (Airflow's
    ``Trigger.assign_unassigned``). One transaction; the claimed rows are locked ``SKIP
    LOCKED``, and the claiming ``UPDATE`` re-checks they are still unclaimed."""
    now = now or timezone.now()
    cutoff = health_cutoff(now)
    with transaction.atomic():
        dead = Triggerer.objects.filter(Q(heartbeat__lt=cutoff) | Q(ended_at__isnull=False))
        released = Trigger.objects.filter(triggerer__in=dead.values("pk")).update(triggerer=None)
        room = capacity - Trigger.objects.filter(triggerer_id=triggerer_id).count()
        claimed = 0
        if room > 0:
            ids = list(
                Trigger.objects.filter(_waited_on(), triggerer__isnull=True)
                .order_by("pk")
                .select_for_update(skip_locked=True, of=("self",))
                .values_list("pk", flat=True)[:room]
            )
            if ids:
                claimed = Trigger.objects.filter(pk__in=ids, triggerer__isnull=True).update(
                    triggerer=triggerer_id
                )
    if released:
        logger.warning("released %d trigger(s) of dead triggerer(s)", released)
    return ClaimResult(released=released, claimed=claimed)


@dataclass(frozen=True)
class TriggerWork:
    """A trigger as its triggerer runs it."""

    id: int
    classpath: str
    kwargs: str  # JSON text of the serde form (or the client's own string)
    timeout: datetime | None  # the earliest deadline of the task instances waiting on it
    label: str  # ``dag.task @ run (try n)`` of a task instance waiting on it
    #: an asset watcher's trigger (runs for as long as it is claimed; each event becomes
    #: asset events, numbered from ``sequence``: ``services.runs.watchers``)
    watcher: bool = False
    sequence: int = 0


def triggers_assigned(*, triggerer_id: int) -> list[TriggerWork]:
    """The triggers this triggerer holds that a deferred task instance still waits on. Two
    queries."""
    triggers = list(
        Trigger.objects.filter(_waited_on(), triggerer_id=triggerer_id).values_list(
            "pk", "classpath", "kwargs"
        )
    )
    waiting: dict[int, tuple[str, datetime | None]] = {}
    for (
        trigger_id,
        dag_id,
        task_id,
        run_id,
        map_index,
        try_number,
        timeout,
    ) in TaskInstance.objects.filter(
        trigger_id__in=[row[0] for row in triggers], state=TaskInstanceState.DEFERRED
    ).values_list(
        "trigger_id", "dag_id", "task_id", "run_id", "map_index", "try_number", "trigger_timeout"
    ):
        suffix = f"[{map_index}]" if map_index >= 0 else ""
        waiting[trigger_id] = (f"{dag_id}.{task_id}{suffix} @ {run_id} (try {try_number})", timeout)
    return [
        TriggerWork(
            id=pk,
            classpath=classpath,
            kwargs=kwargs,
            timeout=waiting.get(pk, ("", None))[1],
            label=waiting.get(pk, (f"trigger {pk}", None))[0],
        )
        for pk, classpath, kwargs in triggers
    ]


def triggers_clean() -> int:
    """Delete the triggers no deferred task instance waits on (Airflow's
    ``Trigger.clean_unused``): its task instance was resumed, marked, cleared or timed out.
    One ``DELETE``."""
    deleted, _ = Trigger.objects.filter(~_waited_on()).delete()
    return deleted


# --- resuming -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Resumed:
    task_instance_id: uuid.UUID
    label: str
    next_method: str


def trigger_event_submit(*, trigger_id: int, payload: Any) -> list[Resumed]:
    """The trigger fired: each task instance deferred on it goes ``scheduled`` to run
    ``next_method`` with its ``next_kwargs`` and ``event`` = ``payload`` (already in the
    SDK's serde form; Airflow's ``handle_event_submit``); the trigger is deleted. A task
    instance whose stored ``next_kwargs`` is not an object cannot take the event: it is
    scheduled to fail instead, saying why. Nothing when none waits (the event came twice, or
    late): exactly-once resumption. Workers are woken at the commit."""

    def resumed_with(ti: TaskInstance) -> tuple[str, Any]:
        if not isinstance(ti.next_kwargs, dict):
            return TRIGGER_FAIL_REPR, {
                "error": "Could not resume the task: its stored next_kwargs is not an object"
            }
        return ti.next_method or "", {**ti.next_kwargs, "event": payload}

    return _resume(trigger_id, resumed_with)


def trigger_failure_submit(
    *, trigger_id: int, traceback: Sequence[str] | None = None
) -> list[Resumed]:
    """The trigger raised (or could not be loaded): its task instances are scheduled to fail
    (``next_method="__fail__"``, Airflow's ``submit_failure``): the worker runs them, the SDK
    logs ``traceback`` and raises ``TaskDeferralError`` (so their failure callbacks and
    retries run as for any failure)."""
    kwargs = {"error": TRIGGER_FAILURE, "traceback": list(traceback) if traceback else None}
    return _resume(trigger_id, lambda _ti: (TRIGGER_FAIL_REPR, kwargs))


def _resume(
    trigger_id: int, resumed_with: Callable[[TaskInstance], tuple[str, Any]]
) -> list[Resumed]:
    now = timezone.now()
    resumed: list[Resumed] = []
    with transaction.atomic():
        waiting = list(
            TaskInstance.objects.select_for_update(of=("self",))
            .filter(trigger_id=trigger_id, state=TaskInstanceState.DEFERRED)
            .order_by("pk")
        )
        for ti in waiting:
            if ti.next_kwargs is None:
                ti.next_kwargs = {}
            ti.next_method, ti.next_kwargs = resumed_with(ti)
            ti.state = TaskInstanceState.SCHEDULED
            ti.trigger = None
            ti.updated_at = now
            ti.save(update_fields=["state", "trigger", "next_method", "next_kwargs", "updated_at"])
            resumed.append(Resumed(ti.pk, ti.task_label, ti.next_method or ""))
        Trigger.objects.filter(pk=trigger_id).delete()
        if resumed:
            notify(RUNS_CHANNEL)
    for one in resumed:
        logger.info("task instance %s resumed (%s)", one.label, one.next_method)
    return resumed


def task_instances_deferral_timeout(*, now: datetime | None = None) -> int:
    """Deferred task instances past their ``trigger_timeout`` → ``scheduled`` to fail with
    ``Trigger timeout`` (Airflow's ``check_trigger_timeouts``: the SDK raises
    ``TaskDeferralTimeout``), whether or not a triggerer runs; their triggers are then
    unused (:func:`triggers_clean`). One ``UPDATE`` (re-checking the state, so a task
    instance an event resumed first is left alone); how many timed out."""
    now = now or timezone.now()
    timed_out = TaskInstance.objects.filter(
        state=TaskInstanceState.DEFERRED, trigger_timeout__lt=now
    ).update(
        state=TaskInstanceState.SCHEDULED,
        next_method=TRIGGER_FAIL_REPR,
        next_kwargs={"error": TRIGGER_TIMEOUT},
        trigger=None,
        updated_at=now,
    )
    if timed_out:
        notify(RUNS_CHANNEL)
        triggers_clean()
        logger.info("timed out %d deferred task instance(s) without fired triggers", timed_out)
    return timed_out


#: The most task instances one pass starts in the triggerer (the rest wait for the next).
START_LIMIT = 500


def starts_in_triggerer() -> Q:
    """The ``scheduled`` task instances that start in the triggerer and have not yet: their
    task has ``start_trigger_args`` and they have no ``next_method`` (one resumed by its
    trigger has one, and runs on a worker)."""
    declared = DagTask.objects.filter(
        dag_id=OuterRef("dag_id"), task_id=OuterRef("task_id"), start_trigger_args__isnull=False
    )
    return Q(next_method__isnull=True) & Q(Exists(declared))


def task_instances_start_in_triggerer(*, now: datetime | None = None) -> int:
    """Defer the ``scheduled`` task instances that start in the triggerer (Airflow's
    ``TaskInstance.defer_task`` with ``start_trigger_args``): a trigger from their task's
    ``start_trigger_args``, ``next_method``/``next_kwargs`` from them, the trigger timeout
    from now, and the try's start now. One transaction; the rows are locked ``SKIP LOCKED``
    (two schedulers never defer one twice). Triggerers are woken at the commit. How many."""
    now = now or timezone.now()
    with transaction.atomic():
        waiting = list(
            TaskInstance.objects.select_for_update(skip_locked=True, of=("self",))
            .filter(starts_in_triggerer(), state=TaskInstanceState.SCHEDULED)
            .order_by("pk")[:START_LIMIT]
        )
        if not waiting:
            return 0
        declared: dict[tuple[str, str], dict[str, Any]] = {
            (dag_id, task_id): dict(args or {})
            for dag_id, task_id, args in DagTask.objects.filter(
                dag_id__in={ti.dag_id for ti in waiting}, start_trigger_args__isnull=False
            ).values_list("dag_id", "task_id", "start_trigger_args")
        }
        for ti in waiting:
            args = declared[(ti.dag_id, ti.task_id)]
            kwargs = args.get("trigger_kwargs") or {}
            trigger = Trigger.objects.create(
                classpath=args["trigger_cls"], kwargs=json.dumps(kwargs), created_date=now
            )
            timeout = args.get("timeout")
            ti.state = TaskInstanceState.DEFERRED
            ti.trigger = trigger
            ti.trigger_classpath = args["trigger_cls"]
            ti.trigger_kwargs = kwargs
            ti.next_method = args["next_method"]
            ti.next_kwargs = args.get("next_kwargs") or {}
            ti.trigger_timeout = now + timedelta(seconds=timeout) if timeout else None
            ti.start_date = now
            ti.updated_at = now
            ti.save(
                update_fields=[
                    "state",
                    "trigger",
                    "trigger_classpath",
                    "trigger_kwargs",
                    "next_method",
                    "next_kwargs",
                    "trigger_timeout",
                    "start_date",
                    "updated_at",
                ]
            )
        notify(TRIGGERS_CHANNEL)
    for ti in waiting:
        logger.info(
            "task instance %s started in the triggerer (%s)", ti.task_label, ti.trigger_classpath
        )
    return len(waiting)


#: The states a trigger's task-end event may end its task instance in (Airflow's
#: ``TaskSuccessEvent``, ``TaskFailedEvent``, ``TaskSkippedEvent``).
TASK_END_STATES = frozenset(
    {TaskInstanceState.SUCCESS, TaskInstanceState.FAILED, TaskInstanceState.SKIPPED}
)


def trigger_task_end_submit(
    *, trigger_id: int, state: str, xcoms: dict[str, Any] | None = None
) -> list[Resumed]:
    """The trigger ended its task itself (``end_from_trigger``: a ``TaskSuccessEvent``,
    ``TaskFailedEvent`` or ``TaskSkippedEvent``; Airflow's ``handle_event_submit`` for a
    ``BaseTaskEndEvent``): each task instance deferred on it ends in ``state`` without a
    worker, its ``xcoms`` pushed; a failure with tries left becomes ``up_for_retry`` (no XComs)
    instead, and a failure asks for the task's ``on_failure_callback`` / ``on_retry_callback``
    (``runs.callbacks``; Airflow's ``TaskCallbackRequest``). The trigger is deleted; each run
    moves on after the commit. Nothing when none waits (exactly once, as for an event)."""
    from assets_app.services.runs.advance import dag_run_progress
    from assets_app.services.runs.tries import is_eligible_to_retry, task_instance_next_try

    if state not in TASK_END_STATES:
        raise ValueError(f"a trigger cannot end a task in state {state!r}")
    now = timezone.now()
    ended: list[tuple[TaskInstance, Resumed]] = []
    with transaction.atomic():
        waiting = list(
            TaskInstance.objects.select_for_update(of=("self",))
            .filter(trigger_id=trigger_id, state=TaskInstanceState.DEFERRED)
            .order_by("pk")
        )
        for ti in waiting:
            label = ti.task_label
            retry = state == TaskInstanceState.FAILED and is_eligible_to_retry(
                state=ti.state, try_number=ti.try_number, max_tries=ti.max_tries
            )
            if state == TaskInstanceState.FAILED:  # its process is gone: the DAG processor runs it
                task_callback_request(
                    task_instance=ti,
                    try_number=ti.try_number,
                    failed=not retry,
                    reason="its trigger ended the task failed",
                )
            if retry:
                task_instance_next_try(
                    ti, end_date=now, failure_reason="its trigger ended the task failed"
                )
            else:
                ti.state = state
                ti.end_date = now
                ti.duration = (now - ti.start_date).total_seconds() if ti.start_date else None
                ti.next_method = None
                ti.next_kwargs = None
                ti.trigger = None
                ti.updated_at = now
                ti.save(
                    update_fields=[
                        "state",
                        "end_date",
                        "duration",
                        "next_method",
                        "next_kwargs",
                        "trigger",
                        "updated_at",
                    ]
                )
                for key, value in (xcoms or {}).items():
                    XCom.objects.bulk_create(
                        [
                            XCom(
                                dag_run_id=ti.dag_run_id,
                                dag_id=ti.dag_id,
                                run_id=ti.run_id,
                                task_id=ti.task_id,
                                map_index=ti.map_index,
                                key=str(key),
                                value=value,
                                timestamp=now,
                            )
                        ],
                        update_conflicts=True,
                        unique_fields=["dag_run", "task_id", "map_index", "key"],
                        update_fields=["value", "timestamp"],
                    )
            ended.append((ti, Resumed(ti.pk, label, f"ended {ti.state} by its trigger")))
        Trigger.objects.filter(pk=trigger_id).delete()
        if any(ti.state == TaskInstanceState.UP_FOR_RETRY for ti, _ in ended):
            notify(RUNS_CHANNEL)
    for ti, one in ended:
        if ti.state != TaskInstanceState.UP_FOR_RETRY:
            dag_run_progress(dag_run_id=ti.dag_run_id, has_downstream=True, end_date=now)
        logger.info("task instance %s %s", one.label, one.next_method)
    return [one for _, one in ended]
