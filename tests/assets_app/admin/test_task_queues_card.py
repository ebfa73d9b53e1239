"""The admin index's "Task queues" card: per task queue (``DagTask.queue``), the task
instances queued and not yet handed over, and the oldest queued one's wait."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from assets_app.models import TaskInstance
from tests.runtime.worker.conftest import declare, scheduled_task_instances

pytestmark = pytest.mark.django_db


def test_the_index_shows_each_task_queue_with_its_oldest_wait(admin_client):
    declare([{"dag_id": "queues_card", "tasks": [{"task_id": "train", "queue": "gpu"}]}])
    first, _ = scheduled_task_instances("queues_card", "train", 2)
    TaskInstance.objects.filter(pk=first.pk).update(
        state="queued", updated_at=timezone.now() - timedelta(minutes=3)
    )

    page = admin_client.get("/admin/").content.decode()

    card = page[page.index('id="ar-card-task-queues"') :]
    card = card[: card.index("</div>")]
    assert '<b>1</b> queued on gpu, oldest <span class="ar-duration">3 m' in card, repr(card)
    assert "1 to hand over" in card, card


def test_no_card_without_waiting_task_instances(admin_client):
    assert 'id="ar-card-task-queues"' not in admin_client.get("/admin/").content.decode()
