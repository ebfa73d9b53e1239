"""``EXECUTOR=celery``'s side in the scheduler: each pass hands the runnable task instances to
Celery (Airflow's CeleryExecutor, in the scheduler's loop).

One transaction per pass claims up to ``limit`` task instances (``task_instances_claim``:
``scheduled`` → ``queued``, pools, ``max_active_*`` and priorities as for ``manage.py
worker``), mints each a token for that task instance only (``token_issue``, the execution API's
lifetime ``JWT_TTL_SECONDS``, refreshed by the server while the task runs) and builds its
``ExecuteTask`` workload (:func:`runtime.launch.airflow_workload`: its DAG file relative to the
DAG folder it was loaded from, which the worker's ``AIRFLOW__CORE__DAGS_FOLDER`` mirrors).
After the commit the workloads go to the broker, each on its task's ``queue``; one the broker
does not take is given back (``queued`` → ``scheduled``) for the next pass. A task instance
no worker takes within ``TASK_QUEUED_TIMEOUT`` is failed (or retried) by the scheduler's
upkeep, as with the local executor; its workload, if it comes later, is refused (409).

A task with a ``callable`` (the manifest's ``task_sdk`` code, which lives on the server's
disk) is not an Airflow workload: it is failed at once with a reason saying so.
"""

from __future__ import annotations

import importlib.util
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction

from assets_app.models import DagTask, TaskInstance
from assets_app.services.runs.claims import task_instances_claim, task_instances_unclaim
from assets_app.services.scheduling.upkeep import task_instance_fail_queued
from assets_app.tokens import token_issue
from runtime.launch import airflow_workload

logger = logging.getLogger(__name__)

#: The most task instances one pass hands over.
DISPATCH_LIMIT = 256


@dataclass(frozen=True)
class Sendable:
    """One workload for the broker: its task instance, queue and JSON text."""

    task_instance_id: Any
    label: str
    queue: str
    text: str


#: Sends the workloads; returns the ids of those the broker did not take.
Sender = Callable[[list[Sendable]], list[Any]]


@dataclass
class DispatchResult:
    sent: list[Sendable] = field(default_factory=list)
    given_back: int = 0
    failed: list[str] = field(default_factory=list)  # "label: reason"


def _rel_path(dag_task: DagTask) -> str | None:
    """The DAG file relative to the folder it was loaded from (else its own folder)."""
    if not dag_task.airflow_dag_file:
        return None
    dag_file = Path(dag_task.airflow_dag_file)
    folder = Path(dag_task.airflow_dags_folder or dag_file.parent)
    if not dag_file.is_relative_to(folder):
        folder = dag_file.parent
    return dag_file.relative_to(folder).as_posix()


def task_instances_dispatch(*, send: Sender, limit: int = DISPATCH_LIMIT) -> DispatchResult:
    """Claim up to ``limit`` task instances and send their workloads after the commit (see the
    module docstring). ``send`` runs after the commit (``transaction.on_commit``)."""
    result = DispatchResult()
    unrunnable: list[tuple[TaskInstance, str]] = []
    with transaction.atomic():
        claimed = task_instances_claim(limit=limit)
        if not claimed:
            return result
        dag_tasks = {
            (task.dag_id, task.task_id): task
            for task in DagTask.objects.filter(
                dag_id__in={ti.dag_id for ti in claimed},
                task_id__in={ti.task_id for ti in claimed},
            )
        }
        for ti in claimed:
            label = f"{ti.dag_id}.{ti.task_id} @ {ti.run_id} try {ti.try_number}"
            dag_task = dag_tasks.get((ti.dag_id, ti.task_id))
            rel_path = _rel_path(dag_task) if dag_task is not None else None
            if dag_task is None or rel_path is None:
                unrunnable.append(
                    (
                        ti,
                        f"{ti.dag_id}.{ti.task_id}: EXECUTOR=celery runs the tasks of DAG files "
                        "(airflow_dag_file) only; this task has none (a manifest 'callable' "
                        "runs under EXECUTOR=local)",
                    )
                )
                continue
            token = token_issue(task_instance_id=ti.pk)
            workload = airflow_workload(
                ti=ti, token=token, dag_rel_path=rel_path, queue=dag_task.queue
            )
            result.sent.append(Sendable(ti.pk, label, dag_task.queue, json.dumps(workload)))
        to_send = list(result.sent)

        def hand_over() -> None:
            refused = send(to_send) if to_send else []
            if refused:
                result.given_back = task_instances_unclaim(task_instance_ids=refused)
                refused_set = set(refused)
                result.sent = [s for s in result.sent if s.task_instance_id not in refused_set]

        transaction.on_commit(hand_over)
    for ti, reason in unrunnable:  # each in its own transaction, as the upkeep's reaping
        if task_instance_fail_queued(task_instance_id=ti.pk, reason=reason) is not None:
            result.failed.append(f"{ti.dag_id}.{ti.task_id} @ {ti.run_id}: {reason}")
    return result


@dataclass(eq=False)
class CelerySender:
    """Sends workloads to ``CELERY_BROKER_URL`` (one connection per batch); a workload the
    broker did not take is reported and returned."""

    broker_url: str
    visibility_timeout: int
    report: Callable[[str], None] = logger.warning
    _app: Any = field(default=None, init=False)

    @classmethod
    def from_settings(cls, *, report: Callable[[str], None]) -> CelerySender:
        if not settings.CELERY_BROKER_URL:
            raise ValueError(
                "EXECUTOR=celery needs CELERY_BROKER_URL (amqp://… or redis://…): the broker "
                "the scheduler sends task instances to"
            )
        if importlib.util.find_spec("celery") is None:
            raise ValueError("EXECUTOR=celery needs Celery: pip install -e '.[celery]'")
        return cls(
            broker_url=settings.CELERY_BROKER_URL,
            visibility_timeout=settings.CELERY_VISIBILITY_TIMEOUT,
            report=report,
        )

    def __call__(self, batch: list[Sendable]) -> list[Any]:
        from runtime.celery_app import TASK_NAME, celery_app  # the celery extra: EXECUTOR=celery

        if self._app is None:
            self._app = celery_app(
                broker_url=self.broker_url, visibility_timeout=self.visibility_timeout
            )
        refused: list[Any] = []
        try:
            with self._app.producer_or_acquire() as producer:
                for index, item in enumerate(batch):
                    try:
                        self._app.send_task(
                            TASK_NAME,
                            args=[item.text],
                            queue=item.queue,
                            producer=producer,
                            retry=True,
                        )
                    except Exception as exc:
                        self.report(f"the broker did not take {item.label}: {exc}")
                        refused += [rest.task_instance_id for rest in batch[index:]]
                        break
        except Exception as exc:
            self.report(f"the broker could not be reached: {exc}")
            return [item.task_instance_id for item in batch]
        return refused
