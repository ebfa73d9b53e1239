"""``/api/v2/pools`` in Airflow's shapes: list, get, create, patch (``update_mask``), delete
and bulk; ``default_pool`` kept; every bad input a 4xx naming the field. Airflow's own client's
``PoolApi`` drives it against a live server."""

from __future__ import annotations

import httpx
import pytest
from airflow_client.client import ApiClient, Configuration
from airflow_client.client.api.pool_api import PoolApi
from airflow_client.client.exceptions import BadRequestException, NotFoundException
from airflow_client.client.models.bulk_body_pool_body import BulkBodyPoolBody
from airflow_client.client.models.pool_body import PoolBody
from airflow_client.client.models.pool_patch_body import PoolPatchBody
from django.contrib.auth.models import User

from assets_app.models import Pool
from tests.factories import TaskInstanceFactory

pytestmark = pytest.mark.django_db


def test_list_get_and_slots(admin_api):
    Pool.objects.create(pool="reports", slots=4, description="r", include_deferred=True)
    TaskInstanceFactory(pool="reports", pool_slots=2, state="running")
    TaskInstanceFactory(pool="reports", state="queued")
    TaskInstanceFactory(pool="reports", state="deferred")
    TaskInstanceFactory(pool="reports", state="scheduled")

    listed = admin_api.get("pools").json()
    assert listed["total_entries"] == 2
    assert [p["name"] for p in listed["pools"]] == ["default_pool", "reports"]
    one = admin_api.get("pools/reports").json()
    assert one == {
        "name": "reports",
        "slots": 4,
        "description": "r",
        "include_deferred": True,
        "occupied_slots": 4,
        "running_slots": 2,
        "queued_slots": 1,
        "scheduled_slots": 1,
        "open_slots": 0,
        "deferred_slots": 1,
        "team_name": None,
    }
    page = admin_api.get("pools", {"limit": 1, "offset": 1, "order_by": "-name"}).json()
    assert [p["name"] for p in page["pools"]] == ["default_pool"]
    assert admin_api.get("pools", {"pool_name_pattern": "REP"}).json()["total_entries"] == 1
    assert admin_api.get("pools/nope").status_code == 404


def test_create_patch_delete(admin_api):
    created = admin_api.post("pools", {"name": "p", "slots": 2})
    assert created.status_code == 201, created.content
    assert created.json()["open_slots"] == 2
    assert admin_api.post("pools", {"name": "p", "slots": 2}).status_code == 409

    patched = admin_api.patch("pools/p?update_mask=slots", {"slots": 7, "description": "x"})
    assert (patched.json()["slots"], patched.json()["description"]) == (7, None)
    patched = admin_api.patch("pools/p", {"description": "x", "include_deferred": True})
    assert (patched.json()["description"], patched.json()["include_deferred"]) == ("x", True)
    assert admin_api.delete("pools/p").status_code == 204
    assert admin_api.delete("pools/p").status_code == 404


def test_default_pool_is_kept(admin_api):
    response = admin_api.delete("pools/default_pool")
    assert (response.status_code, response.json()) == (
        400,
        {"detail": "Default Pool can't be deleted"},
    )
    refused = admin_api.patch("pools/default_pool", {"slots": 3})
    assert refused.status_code == 400
    assert "Only slots and included_deferred" in refused.json()["detail"]
    assert (
        admin_api.patch("pools/default_pool?update_mask=slots", {"slots": 3}).json()["slots"] == 3
    )


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "field"),
    [
        pytest.param("post", "pools", {"name": "p"}, 422, "slots", id="no-slots"),
        pytest.param("post", "pools", {"name": "p", "slots": -2}, 422, "slots", id="slots-low"),
        pytest.param("post", "pools", {"name": "p", "slots": "3"}, 422, "slots", id="slots-text"),
        pytest.param("post", "pools", {"name": "x" * 257, "slots": 1}, 422, "name", id="long"),
        pytest.param("post", "pools", {"name": "", "slots": 1}, 400, "name", id="empty-name"),
        pytest.param("post", "pools", {"name": "p", "slots": 1, "x": 1}, 422, "x", id="unknown"),
        pytest.param(
            "post",
            "pools",
            {"name": "p", "slots": 1, "team_name": "t"},
            422,
            "team_name",
            id="team",
        ),
        pytest.param("post", "pools", {"name": "p", "slots": 2**31}, 400, "slots", id="huge"),
        pytest.param("patch", "pools/q", {"slots": None}, 400, "slots", id="slots-null"),
        pytest.param("patch", "pools/q", {"pool": "other"}, 400, "pool name", id="rename"),
        pytest.param(
            "patch", "pools/q", {"include_deferred": "yes"}, 422, "include_deferred", id="bool"
        ),
    ],
)
def test_bad_input_names_the_field(admin_api, method, path, body, status, field):
    Pool.objects.create(pool="q", slots=1)
    response = getattr(admin_api, method)(path, body)
    assert response.status_code == status, response.content
    assert field in str(response.json()["detail"])


def test_bulk(admin_api):
    Pool.objects.create(pool="old", slots=1)
    response = admin_api.patch(
        "pools",
        {
            "actions": [
                {
                    "action": "create",
                    "entities": [{"name": "a", "slots": 1}, {"name": "old", "slots": 1}],
                },
                {"action": "update", "entities": [{"name": "old", "slots": 9}]},
                {"action": "delete", "entities": ["a", "default_pool"]},
            ]
        },
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["create"]["success"] == ["a"]
    assert body["create"]["errors"][0]["status_code"] == 409
    assert body["update"] == {"success": ["old"], "errors": []}
    assert body["delete"]["success"] == ["a"]
    assert body["delete"]["errors"][0]["status_code"] == 400
    assert Pool.objects.get(pool="old").slots == 9


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_airflows_client_pool_api(server):
    User.objects.create_superuser("ops", "ops@example.com", "s3cret")
    token = httpx.post(
        f"{server.url}/auth/token", json={"username": "ops", "password": "s3cret"}
    ).json()["access_token"]
    pools = PoolApi(ApiClient(Configuration(host=server.url, access_token=token)))

    created = pools.post_pool(PoolBody(name="reports", slots=3, description="nightly"))
    assert (created.name, created.slots, created.open_slots) == ("reports", 3, 3)
    listed = pools.get_pools(limit=10, order_by=["name"])
    assert [p.name for p in listed.pools] == ["default_pool", "reports"]
    assert listed.total_entries == 2
    assert pools.get_pool("default_pool").slots == 128
    patched = pools.patch_pool(
        "reports", PoolPatchBody(slots=5, include_deferred=True), update_mask=["slots"]
    )
    assert (patched.slots, patched.include_deferred) == (5, False)
    bulk = pools.bulk_pools(
        BulkBodyPoolBody.from_dict(
            {"actions": [{"action": "create", "entities": [{"name": "b", "slots": 1}]}]}
        )
    )
    assert bulk.create.success == ["b"]
    with pytest.raises(BadRequestException):
        pools.delete_pool("default_pool")
    pools.delete_pool("reports")
    with pytest.raises(NotFoundException):
        pools.get_pool("reports")
    assert set(Pool.objects.values_list("pool", flat=True)) == {"default_pool", "b"}


def test_a_task_instances_dependencies_name_its_missing_pool(admin_api):
    ti = TaskInstanceFactory(pool="missing", state="scheduled")
    path = f"dags/{ti.dag_id}/dagRuns/{ti.run_id}/taskInstances/{ti.task_id}/dependencies"

    waiting = admin_api.get(path).json()
    assert waiting["dependencies"][0]["name"] == "Pool Slots Available"
    assert "pool 'missing' does not exist" in waiting["dependencies"][0]["reason"]

    Pool.objects.create(pool="missing", slots=1)
    assert admin_api.get(path).json() == {"dependencies": []}
    assert admin_api.get(path.replace(ti.task_id, "nope")).status_code == 404
