"""The Celery application both sides of ``EXECUTOR=celery`` share: the scheduler sends each
ready task instance's ``ExecuteTask`` workload with it (:mod:`runtime.celery_dispatch`), the
Celery worker (:mod:`runtime.celery_worker`) runs them. Standard library and Celery only: no
Django, no database, no secret.

The message is Airflow's own: the task ``execute_workload`` (the name Airflow's Celery
provider registers) with one argument, the workload as JSON, on the Celery queue named by the
task's ``queue`` (default ``default``). Delivery is at least once:

- ``task_acks_late`` with ``task_reject_on_worker_lost``: a message is acknowledged once its
  task has ended, so a worker killed mid-task leaves it to the broker, which delivers it again
  (RabbitMQ: when the worker's connection closes; Redis: after the visibility timeout,
  ``CELERY_VISIBILITY_TIMEOUT``);
- ``worker_prefetch_multiplier`` 1: a worker holds no more messages than it has slots;
- a workload delivered again is refused by the execution API's state check (``PATCH /run``
  answers 409 once the task instance is no longer ``queued``), so one try runs once.
"""

from __future__ import annotations

from typing import Any

from celery import Celery

#: The Celery task's name, Airflow's (``airflow.providers.celery``'s ``execute_workload``).
TASK_NAME = "execute_workload"
#: The queue of a task that names none (Airflow's ``[operators] default_queue``).
DEFAULT_QUEUE = "default"
#: Seconds an unacknowledged message stays with a Redis consumer before Redis hands it to
#: another (Airflow's Celery default: 6 h); longer than the longest task.
DEFAULT_VISIBILITY_TIMEOUT = 21600
#: Seconds a publish or a broker connection may take before it fails (nothing waits forever).
CONNECT_TIMEOUT = 5.0


def celery_app(*, broker_url: str, visibility_timeout: int = DEFAULT_VISIBILITY_TIMEOUT) -> Celery:
    """The app for ``broker_url`` (``amqp://…`` or ``redis://…``), with the settings above."""
    app = Celery("asset_registry", broker=broker_url, set_as_current=False)
    config: dict[str, Any] = {
        "broker_connection_timeout": CONNECT_TIMEOUT,
        "broker_connection_retry_on_startup": True,
        "broker_transport_options": {"visibility_timeout": visibility_timeout},
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "task_acks_on_failure_or_timeout": True,
        "worker_prefetch_multiplier": 1,
        "task_default_queue": DEFAULT_QUEUE,
        "task_serializer": "json",
        "accept_content": ["json"],
        "task_ignore_result": True,
        "result_backend": None,
        "worker_hijack_root_logger": False,
        "worker_send_task_events": False,
        # a publish that cannot reach the broker fails within seconds, not forever
        "task_publish_retry_policy": {
            "max_retries": 2,
            "interval_start": 0,
            "interval_step": 0.5,
            "interval_max": 1,
        },
    }
    app.conf.update(config)
    return app
