"""``GET /api/v1/executor``: per task queue the task instances queued and scheduled and the
oldest wait; with ``EXECUTOR=celery`` the Celery workers seen (or why not); the permission
``view_taskinstance``."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from assets_app.models import TaskInstance
from tests.runtime.worker.conftest import declare, scheduled_task_instances

pytestmark = pytest.mark.django_db


def test_the_queues_hold_their_queued_and_scheduled_task_instances_and_the_oldest_wait(
    client_for,
):
    # given tasks on two queues: two queued (one for 90 s) and one scheduled on "gpu", one
    # scheduled on default
    declare(
        [
            {
                "dag_id": "executor_state",
                "tasks": [{"task_id": "train", "queue": "gpu"}, {"task_id": "report"}],
            }
        ]
    )
    trains = scheduled_task_instances("executor_state", "train", 3)
    scheduled_task_instances("executor_state", "report", 1)
    long_ago = timezone.now() - timedelta(seconds=90)
    TaskInstance.objects.filter(pk=trains[0].pk).update(state="queued", updated_at=long_ago)
    TaskInstance.objects.filter(pk=trains[1].pk).update(state="queued")

    # when an operator asks
    answer = client_for("ops", "view_taskinstance").get("/api/v1/executor")

    # then
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert body["executor"] == "local"
    assert body["workers"] == []
    assert body["workers_error"] == ""
    default, gpu = body["queues"]
    assert (default["queue"], default["queued"], default["scheduled"]) == ("default", 0, 1)
    assert default["oldest_queued_at"] is None
    assert default["oldest_wait_seconds"] is None
    assert (gpu["queue"], gpu["queued"], gpu["scheduled"]) == ("gpu", 2, 1)
    assert 89 <= gpu["oldest_wait_seconds"] < 150


def test_with_celery_an_unreachable_broker_is_said_not_raised(client_for, settings):
    settings.EXECUTOR = "celery"
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"

    answer = client_for("ops", "view_taskinstance").get("/api/v1/executor")

    assert answer.status_code == 200, answer.content
    assert answer.json()["executor"] == "celery"
    assert answer.json()["workers"] == []
    assert answer.json()["workers_error"].startswith("broker unreachable")


def test_it_needs_view_taskinstance(client_for):
    answer = client_for("nobody").get("/api/v1/executor")

    assert answer.status_code == 403
    assert "assets_app.view_taskinstance" in answer.json()["detail"]
