"""Callbacks of Airflow DAG files that the DAG processor runs (``dag_callback_request`` rows,
each run once in a process with the DAG file's code by ``runtime.dag_callbacks``, which records
how it went; a failing callback is logged and recorded, never changes the run or the task):

- **DAG-level** ``on_success_callback`` / ``on_failure_callback`` (Airflow's
  ``DagCallbackRequest``): a run of a DAG whose file gives such a callback
  (``Dag.has_on_success_callback`` / ``has_on_failure_callback``, as Airflow's ``DagModel``)
  asks for it when it ends. The settle that ends a run reads the DAG's flag in the same
  statement (``settle``), so a run of a DAG without callbacks costs no statement more; with
  one, one ``INSERT``.
- **A task's** ``on_failure_callback`` / ``on_retry_callback`` (Airflow's
  ``TaskCallbackRequest``): a try that ends ``failed`` or ``up_for_retry`` *outside its own
  process* — its heartbeat timed out, it was never started (queued timeout), or its trigger
  ended it (``end_from_trigger``) — asks for its task's callback of that outcome, when the task
  has one (``DagTask.has_on_failure_callback`` / ``has_on_retry_callback``). A try that ends in
  its process runs its callbacks there (Airflow's task runner), so never twice. As Airflow, a
  task's success callback is never run by the DAG processor.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from assets_app.models import DagCallbackRequest, DagRunState, DagTask, TaskInstance
from assets_app.notify import CALLBACKS_CHANNEL, notify

logger = logging.getLogger(__name__)

#: Airflow's ``reason`` (``msg``) of the callback's context, by how the run ended.
REASON_SUCCESS = "success"
REASON_TASK_FAILURE = "task_failure"
REASON_TIMED_OUT = "timed_out"

#: How long a callback may run (seconds) before its process is killed and it is recorded failed.
CALLBACK_TIMEOUT = 300.0
#: The longest a pending callback waits for a DAG processor that missed its notification (or
#: runs on SQLite, which has none): its loop wakes at least this often (seconds).
CALLBACK_POLL_INTERVAL = 1.0


def dag_run_callback_request(
    *, dag_run_id: int, dag_id: str, state: str, reason: str | None = None
) -> DagCallbackRequest:
    """Ask for the callback of a run that ended ``state`` (one ``INSERT``, and on PostgreSQL
    a ``NOTIFY`` that wakes the DAG processors)."""
    success = state == DagRunState.SUCCESS
    request = DagCallbackRequest.objects.create(
        dag_run_id=dag_run_id,
        dag_id=dag_id,
        kind=DagCallbackRequest.Kind.SUCCESS if success else DagCallbackRequest.Kind.FAILURE,
        reason=reason or (REASON_SUCCESS if success else REASON_TASK_FAILURE),
    )
    notify(CALLBACKS_CHANNEL)
    logger.info("DAG run %s of %s: %s requested", dag_run_id, dag_id, request.get_kind_display())
    return request


def task_callback_request(
    *, task_instance: TaskInstance, try_number: int, failed: bool, reason: str
) -> DagCallbackRequest | None:
    """Ask for the callback of a try of ``task_instance`` that ended outside its process:
    ``on_failure_callback`` when it ``failed``, else ``on_retry_callback``, with ``reason``
    (why the try ended), if its task has that callback; ``None`` when it has not. One
    ``SELECT``; with a callback, an ``INSERT`` and on PostgreSQL a ``NOTIFY`` (at commit)."""
    flag = "has_on_failure_callback" if failed else "has_on_retry_callback"
    if not DagTask.objects.filter(
        dag_id=task_instance.dag_id, task_id=task_instance.task_id, **{flag: True}
    ).exists():
        return None
    request = DagCallbackRequest.objects.create(
        dag_run_id=task_instance.dag_run_id,
        dag_id=task_instance.dag_id,
        task_id=task_instance.task_id,
        map_index=task_instance.map_index,
        try_number=try_number,
        kind=DagCallbackRequest.Kind.FAILURE if failed else DagCallbackRequest.Kind.RETRY,
        reason=reason[: DagCallbackRequest._meta.get_field("reason").max_length],
    )
    notify(CALLBACKS_CHANNEL)
    logger.info("%s: %s requested", task_instance.task_label, request.get_kind_display())
    return request


def dag_callbacks_claim(
    *, limit: int = 10, now: datetime | None = None
) -> list[DagCallbackRequest]:
    """Claim pending callback requests for this DAG processor: ``pending`` → ``running``,
    oldest first (``SKIP LOCKED``: two processors never claim one twice), with their runs."""
    now = now or timezone.now()
    with transaction.atomic():
        claimed = list(
            DagCallbackRequest.objects.select_for_update(skip_locked=True, of=("self",))
            .select_related("dag_run", "dag_run__dag")
            .filter(state=DagCallbackRequest.State.PENDING)
            .order_by("created_at", "pk")[:limit]
        )
        if claimed:
            DagCallbackRequest.objects.filter(pk__in=[r.pk for r in claimed]).update(
                state=DagCallbackRequest.State.RUNNING, started_at=now
            )
    for request in claimed:
        request.state, request.started_at = DagCallbackRequest.State.RUNNING, now
    return claimed


def dag_callback_finish(*, request_ids: Sequence[int], error: str = "") -> int:
    """Record how claimed callbacks went: ``success``, or ``failed`` with ``error`` (the
    callback's traceback or the reason it could not run)."""
    state = DagCallbackRequest.State.FAILED if error else DagCallbackRequest.State.SUCCESS
    return DagCallbackRequest.objects.filter(pk__in=list(request_ids)).update(
        state=state, ended_at=timezone.now(), error=error[-20000:]
    )
