"""The event log: each face records its writes with the right event, user and ``via``, and no
secret reaches ``extra``."""

from __future__ import annotations

import getpass
import json
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from rest_framework.test import APIClient

from assets_app.models import DagRun, EventLog, TaskInstance
from assets_app.services.audit import Actor, event_log_record
from assets_app.services.dags.declare import dags_set_paused
from assets_app.services.runs.clearing import task_instances_clear, task_instances_select
from assets_app.services.runs.dag_runs import dag_run_trigger
from assets_app.services.runs.marking import dag_run_mark
from assets_app.services.secrets.connections import (
    ConnectionFields,
    connection_create,
    connection_delete,
    connection_update,
)
from assets_app.services.secrets.variables import variable_delete, variable_set
from publicapi.auth import user_token_issue
from tests.factories import DagFactory, DagRunFactory, TaskInstanceFactory

pytestmark = pytest.mark.django_db

OPS = Actor(name="ops", via="rest_api", display_name="Ops")


def only() -> tuple[EventLog, dict]:
    (row,) = EventLog.objects.all()
    return row, json.loads(row.extra)


def test_no_actor_records_nothing():
    DagFactory(dag_id="d")

    dags_set_paused(dag_ids=["d"], is_paused=True)

    assert event_log_record(None, "patch_dag") is None
    assert not EventLog.objects.exists()


def test_of_command_is_the_os_user_via_cli():
    actor = Actor.of_command()

    assert (actor.name, actor.via) == (getpass.getuser(), "cli")


def test_pausing_records_one_patch_dag_per_dag():
    DagFactory(dag_id="a")
    DagFactory(dag_id="b")

    dags_set_paused(dag_ids=["a", "b", "missing"], is_paused=True, actor=OPS)

    rows = list(EventLog.objects.order_by("dag_id"))
    assert [(r.event, r.dag_id, r.owner) for r in rows] == [
        ("patch_dag", "a", "ops"),
        ("patch_dag", "b", "ops"),
    ]
    assert json.loads(rows[0].extra) == {"is_paused": True, "via": "rest_api"}


def test_pausing_many_dags_records_their_events_in_one_statement():
    for n in range(6):
        DagFactory(dag_id=f"warehouse_orders_daily_export_{n}")
    counts = []
    for dag_ids in (
        ["warehouse_orders_daily_export_0"],
        [f"warehouse_orders_daily_export_{n}" for n in range(1, 6)],
    ):
        with CaptureQueriesContext(connection) as queries:
            dags_set_paused(dag_ids=dag_ids, is_paused=True, actor=OPS)
        counts.append(len(queries))

    assert counts[0] == counts[1]
    assert EventLog.objects.filter(event="patch_dag").count() == 6


def test_trigger_records_the_run_and_fills_triggered_by_from_the_actor():
    DagFactory(dag_id="d")

    run = dag_run_trigger(dag_id="d", conf={"password": "pw", "day": 1}, actor=OPS)

    row, extra = only()
    assert (row.event, row.dag_id, row.run_id, row.owner, row.owner_display_name) == (
        "trigger_dag_run",
        "d",
        run.run_id,
        "ops",
        "Ops",
    )
    assert row.logical_date == run.logical_date
    assert (run.triggered_by, run.triggering_user_name) == ("rest_api", "ops")
    assert extra == {"conf": {"password": "***", "day": 1}, "via": "rest_api"}


def test_a_failed_trigger_records_nothing():
    with pytest.raises(Exception, match="not found"):
        dag_run_trigger(dag_id="missing", actor=OPS)

    assert not EventLog.objects.exists()


def test_marking_records_patch_dag_run():
    run = DagRunFactory(dag=DagFactory(dag_id="d"), run_id="r", state="running")

    dag_run_mark(dag_id="d", run_id="r", state="success", actor=OPS)

    row, extra = only()
    assert (row.event, row.dag_id, row.run_id) == ("patch_dag_run", "d", "r")
    assert row.logical_date == run.logical_date
    assert extra == {"state": "success", "via": "rest_api"}


def test_clearing_records_unless_dry_run():
    run = DagRunFactory(dag=DagFactory(dag_id="d"), run_id="r", state="failed")
    TaskInstanceFactory(dag_run=run, task_id="t", state="failed")
    selected = task_instances_select(dag_id="d", run_id="r")

    task_instances_clear(task_instances=selected, dry_run=True, actor=OPS)
    assert not EventLog.objects.exists()
    task_instances_clear(
        task_instances=selected, actor=OPS, event="clear_dag_run", dag_id="d", run_id="r"
    )

    row, extra = only()
    assert (row.event, row.dag_id, row.run_id) == ("clear_dag_run", "d", "r")
    assert extra == {"dry_run": False, "via": "rest_api"}


def test_a_clear_across_dags_records_one_row_per_dag():
    for dag_id in ("nightly_warehouse_load", "hourly_orders_sync"):
        run = DagRunFactory(dag=DagFactory(dag_id=dag_id), run_id="scheduled__1", state="failed")
        TaskInstanceFactory(dag_run=run, task_id="load", state="failed")

    task_instances_clear(task_instances=TaskInstance.objects.all(), actor=OPS)

    rows = EventLog.objects.order_by("dag_id")
    assert [(r.event, r.dag_id) for r in rows] == [
        ("post_clear_task_instances", "hourly_orders_sync"),
        ("post_clear_task_instances", "nightly_warehouse_load"),
    ]


def test_variable_values_are_masked_whatever_their_key():
    variable_set(key="plain", value="s3cr3t", description="d", actor=OPS)
    variable_set(key="plain", value="other", actor=OPS)
    variable_delete(key="plain", actor=OPS)

    rows = list(EventLog.objects.order_by("id"))
    assert [r.event for r in rows] == ["post_variable", "patch_variable", "delete_variable"]
    assert json.loads(rows[0].extra) == {
        "key": "plain",
        "value": "***",
        "description": "d",
        "via": "rest_api",
    }
    assert all("s3cr3t" not in r.extra and "other" not in r.extra for r in rows)


def test_connection_password_and_extra_values_are_masked():
    fields = ConnectionFields(
        conn_type="postgres", login="etl", password="hunter2", extra='{"token": "t0ken", "x": 1}'
    )
    connection_create(conn_id="db", values=fields, actor=OPS)
    connection_update(conn_id="db", changes=ConnectionFields(password="hunter3"), actor=OPS)
    connection_delete(conn_id="db", actor=OPS)

    rows = list(EventLog.objects.order_by("id"))
    assert [r.event for r in rows] == ["post_connection", "patch_connection", "delete_connection"]
    created = json.loads(rows[0].extra)
    assert created["password"] == "***"
    assert created["extra"] == {"token": "***", "x": "***"}
    assert (created["connection_id"], created["login"]) == ("db", "etl")
    assert not any(s in r.extra for r in rows for s in ("hunter2", "hunter3", "t0ken"))


# --- the faces --------------------------------------------------------------------------------


@pytest.fixture
def admin_user() -> User:
    return User.objects.create_superuser("alice", "alice@example.com", "pw", first_name="Alice")


def test_the_admin_records_a_pause_as_its_user_via_ui(admin_user):
    DagFactory(dag_id="d", is_paused=False)
    client = Client()
    client.force_login(admin_user)

    client.post(
        reverse("admin:assets_app_dag_changelist"),
        {"action": "pause", "_selected_action": ["d"]},
    )

    row, extra = only()
    assert (row.event, row.dag_id, row.owner, row.owner_display_name) == (
        "patch_dag",
        "d",
        "alice",
        "Alice",
    )
    assert extra["via"] == "ui"


def test_the_admin_records_a_trigger_via_ui(admin_user):
    DagFactory(dag_id="d")
    client = Client()
    client.force_login(admin_user)

    client.post(
        reverse("admin:assets_app_dag_changelist"),
        {"action": "trigger", "_selected_action": ["d"]},
    )

    row, extra = only()
    assert (row.event, row.owner, extra["via"]) == ("trigger_dag_run", "alice", "ui")
    assert DagRun.objects.get().triggered_by == "ui"


def test_the_command_records_a_trigger_as_the_os_user_via_cli():
    DagFactory(dag_id="d")

    call_command("trigger_dag", "d", stdout=StringIO())

    row, extra = only()
    assert (row.event, row.owner, extra["via"]) == ("trigger_dag_run", getpass.getuser(), "cli")


def test_the_variables_command_records_a_masked_value():
    call_command("variables", "set", "k", "s3cr3t", stdout=StringIO())

    row, extra = only()
    assert (row.event, extra["value"], extra["via"]) == ("post_variable", "***", "cli")


def test_api_v1_records_a_pause_via_rest_api(admin_user):
    DagFactory(dag_id="d")
    client = APIClient()
    client.force_authenticate(admin_user)

    response = client.patch("/api/v1/dags/d", {"is_paused": True}, format="json")

    assert response.status_code == 200, response.content
    row, extra = only()
    assert (row.event, row.owner, extra) == (
        "patch_dag",
        "alice",
        {"is_paused": True, "via": "rest_api"},
    )


def test_api_v2_records_a_trigger_and_a_connection_via_rest_api(admin_user):
    DagFactory(dag_id="d")
    client = Client(HTTP_AUTHORIZATION=f"Bearer {user_token_issue(user=admin_user)}")

    triggered = client.post(
        "/api/v2/dags/d/dagRuns", '{"logical_date": null}', content_type="application/json"
    )
    created = client.post(
        "/api/v2/connections",
        json.dumps({"connection_id": "c", "conn_type": "http", "password": "hunter2"}),
        content_type="application/json",
    )

    assert (triggered.status_code, created.status_code) == (200, 201), created.content
    rows = list(EventLog.objects.order_by("id"))
    assert [(r.event, r.owner) for r in rows] == [
        ("trigger_dag_run", "alice"),
        ("post_connection", "alice"),
    ]
    assert all(json.loads(r.extra)["via"] == "rest_api" for r in rows)
    assert "hunter2" not in rows[1].extra


def test_pool_writes_are_recorded_on_every_face(admin_user, tmp_path):
    from assets_app.models import Pool

    # the command: set, import, delete
    call_command("pools", "set", "warehouse_loads", "4", "nightly loads", stdout=StringIO())
    exported = tmp_path / "pools.json"
    exported.write_text(json.dumps({"reports": {"slots": 2}, "warehouse_loads": {"slots": 6}}))
    call_command("pools", "import", str(exported), stdout=StringIO())
    # /api/v2: create, patch, bulk, delete
    api = Client(HTTP_AUTHORIZATION=f"Bearer {user_token_issue(user=admin_user)}")
    created = api.post(
        "/api/v2/pools",
        json.dumps({"name": "exports", "slots": 3}),
        content_type="application/json",
    )
    patched = api.patch(
        "/api/v2/pools/exports?update_mask=slots",
        json.dumps({"slots": 5}),
        content_type="application/json",
    )
    bulk = api.patch(
        "/api/v2/pools",
        json.dumps(
            {
                "actions": [
                    {"action": "create", "entities": [{"name": "adhoc", "slots": 1}]},
                    {"action": "delete", "entities": ["nope"], "action_on_non_existence": "skip"},
                ]
            }
        ),
        content_type="application/json",
    )
    deleted = api.delete("/api/v2/pools/adhoc")
    # the admin: change, delete
    admin = Client()
    admin.force_login(admin_user)
    reports = Pool.objects.get(pool="reports")
    changed = admin.post(
        reverse("admin:assets_app_pool_change", args=[reports.pk]),
        {"pool": "reports", "slots": 7, "description": "", "include_deferred": ""},
    )
    removed = admin.post(
        reverse("admin:assets_app_pool_delete", args=[reports.pk]), {"post": "yes"}
    )

    assert [r.status_code for r in (created, patched, bulk, deleted)] == [201, 200, 200, 204]
    assert (changed.status_code, removed.status_code) == (302, 302)
    rows = [(r.event, r.owner, json.loads(r.extra)) for r in EventLog.objects.order_by("id")]
    me = getpass.getuser()
    assert [(event, owner, extra["via"]) for event, owner, extra in rows] == [
        ("post_pool", me, "cli"),
        ("bulk_pools", me, "cli"),
        ("post_pool", "alice", "rest_api"),
        ("patch_pool", "alice", "rest_api"),
        ("bulk_pools", "alice", "rest_api"),
        ("delete_pool", "alice", "rest_api"),
        ("patch_pool", "alice", "ui"),
        ("delete_pool", "alice", "ui"),
    ]
    assert rows[0][2] == {
        "name": "warehouse_loads",
        "slots": 4,
        "description": "nightly loads",
        "include_deferred": False,
        "via": "cli",
    }
    assert rows[1][2]["pools"] == ["reports", "warehouse_loads"]
    assert rows[3][2] == {"pool_name": "exports", "slots": 5, "via": "rest_api"}
    assert rows[4][2] == {"create": ["adhoc"], "delete": ["nope"], "via": "rest_api"}
    assert rows[7][2] == {"pool_name": "reports", "via": "ui"}


def test_a_manual_asset_event_is_recorded_with_its_extra_masked(admin_user):
    from tests.factories import AssetFactory

    asset = AssetFactory(name="orders_daily", uri="s3://warehouse/orders/daily")
    api = Client(HTTP_AUTHORIZATION=f"Bearer {user_token_issue(user=admin_user)}")

    response = api.post(
        "/api/v2/assets/events",
        json.dumps({"asset_id": asset.pk, "extra": {"rows": 3, "api_key": "s3cr3t"}}),
        content_type="application/json",
    )
    call_command("create_asset_event", "--name", "orders_daily", stdout=StringIO())

    assert response.status_code == 200, response.content
    rows = list(EventLog.objects.order_by("id"))
    assert [(r.event, json.loads(r.extra)["via"]) for r in rows] == [
        ("create_asset_event", "rest_api"),
        ("create_asset_event", "cli"),
    ]
    extra = json.loads(rows[0].extra)
    assert (extra["asset_id"], extra["name"], extra["event_id"]) == (
        asset.pk,
        "orders_daily",
        response.json()["id"],
    )
    assert extra["extra"] == {"rows": 3, "api_key": "***"}
    assert "s3cr3t" not in rows[0].extra


# --- the Audit log page -----------------------------------------------------------------------


def test_the_audit_log_is_read_only_and_linked_from_the_dag_page(admin_user):
    DagFactory(dag_id="d")
    DagFactory(dag_id="other")
    dags_set_paused(dag_ids=["d", "other"], is_paused=True, actor=OPS)
    client = Client()
    client.force_login(admin_user)
    listing = reverse("admin:assets_app_eventlog_changelist")

    page = client.get(reverse("admin:assets_app_dag_change", args=["d"])).content.decode()
    filtered = client.get(listing, {"dag_id": "d"})
    detail = client.get(
        reverse("admin:assets_app_eventlog_change", args=[EventLog.objects.first().pk])
    )

    assert f"{listing}?dag_id=d" in page
    assert filtered.status_code == 200
    assert [r.dag_id for r in filtered.context["cl"].result_list] == ["d"]
    assert detail.status_code == 200
    assert client.get(reverse("admin:assets_app_eventlog_add")).status_code == 403
