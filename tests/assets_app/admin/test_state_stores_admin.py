"""The admin's read-only lists of the task and asset state stores."""

from __future__ import annotations

from datetime import timedelta

import pytest
import yaml
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from assets_app.models import AssetStateStore, TaskStateStore
from assets_app.services.dags.declare import dags_declare
from assets_app.services.dags.manifest import manifest_parse
from assets_app.services.state.state_stores import asset_state_set, task_state_set
from tests.assets_app.admin import change, changelist, page_text
from tests.factories import TaskInstanceFactory

pytestmark = pytest.mark.django_db

MANIFEST = """
dags:
  - dag_id: producer
    tasks:
      - task_id: produce
        outlets: [{asset: {name: orders, uri: "s3://warehouse/orders"}}]
"""


@pytest.fixture
def stored():
    dags_declare(manifest=manifest_parse(yaml.safe_load(MANIFEST)), fileloc="admin.yaml")
    ti = TaskInstanceFactory(task_id="produce", dag_run__dag__dag_id="producer")
    later = timezone.now() + timedelta(days=30)
    task_state_set(task_instance_id=ti.pk, key="job_id", value="job-7", expires_at=later)
    asset_state_set(
        key="watermark", value={"until": "2026-01-01"}, name="orders", writer_task_instance_id=ti.pk
    )
    return ti


@pytest.mark.parametrize("model", ["taskstatestore", "assetstatestore"])
def test_the_lists_and_pages_show_the_stored_values_read_only(admin_client, stored, model):
    row = (TaskStateStore if model == "taskstatestore" else AssetStateStore).objects.get()

    listed = page_text(admin_client, changelist(model))
    page = page_text(admin_client, change(model, row.pk))

    assert row.key in listed
    assert row.value.replace('"', "&quot;") in listed
    assert row.key in page
    assert admin_client.get(reverse(f"admin:assets_app_{model}_add")).status_code == 403
    assert admin_client.post(change(model, row.pk), {}).status_code == 403


def test_the_asset_list_names_the_writer(admin_client, stored):
    listed = page_text(admin_client, changelist("assetstatestore"))

    assert f"producer.produce @ {stored.run_id}" in listed


@pytest.mark.parametrize("model", ["taskstatestore", "assetstatestore"])
def test_the_lists_query_count_is_flat(admin_client, stored, model):
    with CaptureQueriesContext(connection) as one:
        admin_client.get(changelist(model))
    for n in range(10):
        task_state_set(task_instance_id=stored.pk, key=f"k{n}", value=n)
        asset_state_set(key=f"k{n}", value=n, name="orders", writer_task_instance_id=stored.pk)
    with CaptureQueriesContext(connection) as many:
        admin_client.get(changelist(model))

    assert len(many) == len(one)
