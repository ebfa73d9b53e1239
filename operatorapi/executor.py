"""What the executor holds now, for operators (``GET /api/v1/executor``): per task queue, the
task instances queued (handed over, not started) and scheduled (not yet handed over) and the
oldest queued one's wait; with ``EXECUTOR=celery``, the Celery workers that answer an inspect
and the queues they take (a queue nobody takes is one whose task instances will time out).

Celery is imported only with ``EXECUTOR=celery`` (the ``celery`` extra)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.utils import timezone

from assets_app.selectors.runs import QueueDepth, task_instances_by_queue


@dataclass(frozen=True)
class WorkerSeen:
    """A Celery worker that answered, and the queues it takes."""

    name: str
    queues: list[str]


def celery_workers_seen(*, broker_url: str, timeout: float = 1.0) -> list[WorkerSeen]:
    """The workers that answer Celery's inspect within ``timeout`` seconds (their queues), by
    name. Raises what the broker connection raises when it cannot be reached."""
    from celery import Celery  # the celery extra: EXECUTOR=celery only

    app = Celery("asset_registry_inspect", broker=broker_url, set_as_current=False)
    try:
        with app.connection_for_read() as connection:  # fail fast on a broker that is down
            connection.ensure_connection(max_retries=1, timeout=timeout)
        answers = app.control.inspect(timeout=timeout).active_queues() or {}
    finally:
        app.close()
    return [
        WorkerSeen(name, sorted(str(q.get("name")) for q in queues if isinstance(q, dict)))
        for name, queues in sorted(answers.items())
    ]


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
    try:
        workers = celery_workers_seen(
            broker_url=settings.CELERY_BROKER_URL, timeout=INSPECT_TIMEOUT
        )
    except Exception as exc:  # the broker's client raises many kinds
        return ExecutorState(
            settings.EXECUTOR, timezone.now(), queues, workers_error=f"broker unreachable: {exc}"
        )
    return ExecutorState(settings.EXECUTOR, timezone.now(), queues, workers)
