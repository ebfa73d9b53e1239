"""The pools' admin: slots per pool, writes through the services, default_pool kept; a task
instance's page says when its pool keeps it waiting."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from assets_app.models import Pool
from tests.factories import TaskInstanceFactory

pytestmark = pytest.mark.django_db

CHANGELIST = reverse("admin:assets_app_pool_changelist")


def test_the_list_shows_used_and_open_slots_in_constant_queries(admin_client):
    Pool.objects.create(pool="reports", slots=3)
    TaskInstanceFactory(pool="reports", state="running")
    with CaptureQueriesContext(connection) as one:
        page = admin_client.get(CHANGELIST).content.decode()
    assert "reports" in page
    assert "default_pool" in page
    for n in range(10):
        Pool.objects.create(pool=f"p{n}", slots=-1)
    with CaptureQueriesContext(connection) as many:
        page = admin_client.get(CHANGELIST).content.decode()
    assert "unlimited" in page
    assert len(many) == len(one)


def test_add_edit_and_delete_through_the_services(admin_client):
    add = reverse("admin:assets_app_pool_add")
    response = admin_client.post(
        add, {"pool": "new", "slots": "2", "description": "d", "include_deferred": "on"}
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    pool = Pool.objects.get(pool="new")
    assert (pool.slots, pool.include_deferred) == (2, True)

    refused = admin_client.post(add, {"pool": "bad", "slots": "-3", "description": ""})
    assert refused.status_code == 200
    assert "slots must be -1 (unlimited)" in refused.content.decode()

    change = reverse("admin:assets_app_pool_change", args=[pool.pk])
    admin_client.post(change, {"slots": "5", "description": "e"})
    assert Pool.objects.get(pool="new").slots == 5

    delete = reverse("admin:assets_app_pool_delete", args=[pool.pk])
    admin_client.post(delete, {"post": "yes"})
    assert not Pool.objects.filter(pool="new").exists()


def test_default_pool_cannot_be_deleted(admin_client):
    default = Pool.objects.get(pool="default_pool")
    delete = reverse("admin:assets_app_pool_delete", args=[default.pk])
    assert admin_client.post(delete, {"post": "yes"}).status_code == 403
    assert Pool.objects.filter(pool="default_pool").exists()


def test_a_task_instance_page_says_its_pool_is_missing(admin_client):
    ti = TaskInstanceFactory(pool="nowhere", state="scheduled")
    page = admin_client.get(reverse("admin:assets_app_taskinstance_change", args=[ti.pk]))
    assert "its pool &#x27;nowhere&#x27; does not exist" in page.content.decode()
