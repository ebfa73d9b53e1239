"""What the executor holds now, for operators (``GET /api/v1/executor``): per task queue, the
task instances queued (handed over, not started) and scheduled (not yet handed over) and the
oldest queued one's wait; with ``EXECUTOR=celery``, the Celery workers that answer an inspect
and the queues they take (a queue nobody takes is one whose task instances will time out)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from django.conf import settings
from django.utils import timezone

from assets_app.selectors.runs import QueueDepth, task_instances_by_queue

if TYPE_CHECKING:
    from runtime.celery_app import WorkerSeen

#: Seconds the inspect waits for the workers' answers.
INSPECT_TIMEOUT = 1.0


@dataclass(frozen=True)
class ExecutorState:
    executor: str
    now: datetime
    queues: list[QueueDepth]
    workers: list[WorkerSeen] = field(default_factory=list)
    #: why the workers are not known ("" when they are, or with the local executor)
    workers_error: str = ""


def executor_state() -> ExecutorState:
    """The queues from the database; the workers from Celery's inspect (at most
    ``INSPECT_TIMEOUT`` seconds; a broker that cannot be reached is said, not raised)."""
    queues = task_instances_by_queue()
    if settings.EXECUTOR != "celery":
        return ExecutorState(settings.EXECUTOR, timezone.now(), queues)
    from runtime.celery_app import celery_workers_seen  # the celery extra: EXECUTOR=celery only

    try:
        workers = celery_workers_seen(
            broker_url=settings.CELERY_BROKER_URL, timeout=INSPECT_TIMEOUT
        )
    except Exception as exc:  # the broker's client raises many kinds
        return ExecutorState(
            settings.EXECUTOR, timezone.now(), queues, workers_error=f"broker unreachable: {exc}"
        )
    return ExecutorState(settings.EXECUTOR, timezone.now(), queues, workers)
