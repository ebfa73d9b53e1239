"""``/api/v2/`` writes beyond the assets: marking a DAG run, materializing an asset,
variables and connections (secrets masked as Airflow masks them, never in a response)."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Group, Permission, User

from assets_app.models import (
    Connection,
    DagRun,
    DagRunNote,
    TaskInstance,
    TaskOutletAssetReference,
    Variable,
)
from assets_app.selectors.secrets import connection_get, connection_secrets, variable_value
from assets_app.services.secrets.connections import ConnectionFields, connection_create
from assets_app.services.secrets.variables import variable_set
from publicapi.auth import user_token_issue
from tests.factories import AssetFactory, DagFactory, DagRunFactory, TaskInstanceFactory
from tests.publicapi.conftest import Api

pytestmark = pytest.mark.django_db

SECRET = "hunter2-do-not-show"


# --- PATCH a DAG run --------------------------------------------------------------------------


def test_mark_a_run_success_marks_its_unfinished_task_instances(admin_api):
    # given
    run = DagRunFactory(dag=DagFactory(dag_id="d"), run_id="r", state="running")
    TaskInstanceFactory(dag_run=run, task_id="running", state="running")
    TaskInstanceFactory(dag_run=run, task_id="waiting", state="scheduled")
    TaskInstanceFactory(dag_run=run, task_id="failed", state="failed")
    # when
    response = admin_api.patch("dags/d/dagRuns/r", {"state": "success", "note": "by hand"})
    # then
    assert response.status_code == 200, response.json()
    body = response.json()
    assert (body["state"], body["note"], body["dag_run_id"]) == ("success", "by hand", "r")
    assert body["end_date"] is not None
    assert dict(TaskInstance.objects.values_list("task_id", "state")) == {
        "running": "success",
        "waiting": "skipped",
        "failed": "failed",
    }
    assert admin_api.get("dags/d/dagRuns/r").json()["note"] == "by hand"
    assert admin_api.get("dags/~/dagRuns").json()["dag_runs"][0]["note"] == "by hand"


def test_update_mask_limits_what_a_patch_writes(admin_api):
    DagRunFactory(dag=DagFactory(dag_id="d"), run_id="r", state="failed")
    response = admin_api.patch(
        "dags/d/dagRuns/r?update_mask=note", {"state": "success", "note": "n"}
    )
    assert (response.json()["state"], response.json()["note"]) == ("failed", "n")
    cleared = admin_api.patch("dags/d/dagRuns/r", {"note": None})
    assert cleared.json()["note"] is None
    assert DagRunNote.objects.get().content is None


def test_mark_queued_with_nothing_left_to_run_settles(admin_api):
    run = DagRunFactory(dag=DagFactory(dag_id="d"), run_id="r", state="failed")
    TaskInstanceFactory(dag_run=run, state="success")
    response = admin_api.patch("dags/d/dagRuns/r", {"state": "queued"})
    assert response.json()["state"] == "success"  # ran again at once, as its one task did


@pytest.mark.parametrize(
    ("path", "body", "status", "expected"),
    [
        pytest.param("dags/d/dagRuns/r", {"state": "running"}, 422, "literal_error", id="state"),
        pytest.param("dags/d/dagRuns/r", {"note": "x" * 1001}, 422, "string_too_long", id="note"),
        pytest.param("dags/d/dagRuns/r", {"color": "red"}, 422, "extra_forbidden", id="extra"),
        pytest.param("dags/d/dagRuns/nope", {"state": "success"}, 404, None, id="no-run"),
    ],
)
def test_patch_refusals_write_nothing(admin_api, path, body, status, expected):
    DagRunFactory(dag=DagFactory(dag_id="d"), run_id="r", state="failed")
    response = admin_api.patch(path, body)
    assert response.status_code == status
    if expected:
        assert response.json()["detail"][0]["type"] == expected
    assert DagRun.objects.get().state == "failed"
    assert not DagRunNote.objects.exists()


def test_a_reader_cannot_mark_a_run(reader_api):
    DagRunFactory(dag=DagFactory(dag_id="d"), run_id="r", state="failed")
    response = reader_api.patch("dags/d/dagRuns/r", {"state": "success"})
    assert response.status_code == 403
    assert "assets_app.change_dagrun" in response.json()["detail"]
    assert DagRun.objects.get().state == "failed"


# --- materialize ------------------------------------------------------------------------------


def test_materialize_triggers_the_dag_producing_the_asset(admin_api):
    # given
    asset = AssetFactory()
    producer = DagFactory(dag_id="producer", task_ids=["make"])
    TaskOutletAssetReference.objects.create(asset=asset, dag=producer, task_id="make")
    # when
    response = admin_api.post(f"assets/{asset.pk}/materialize", b"")
    with_body = admin_api.post(
        f"assets/{asset.pk}/materialize", {"dag_run_id": "again", "conf": {"k": 1}}
    )
    # then
    assert response.status_code == 200, response.json()
    # started at once: its DAG has room
    assert (response.json()["dag_id"], response.json()["state"]) == ("producer", "running")
    assert with_body.json()["dag_run_id"] == "again"
    assert with_body.json()["conf"] == {"k": 1}
    assert DagRun.objects.filter(dag_id="producer").count() == 2
    assert TaskInstance.objects.filter(run_id="again", task_id="make").exists()


def test_materialize_refusals_are_airflows(admin_api):
    lonely = AssetFactory()
    shared = AssetFactory()
    for dag_id in ("a", "b"):
        dag = DagFactory(dag_id=dag_id)
        TaskOutletAssetReference.objects.create(asset=shared, dag=dag, task_id="t")
    none = admin_api.post(f"assets/{lonely.pk}/materialize", b"")
    two = admin_api.post(f"assets/{shared.pk}/materialize", b"")
    assert (none.status_code, none.json()) == (
        404,
        {"detail": f"No Dag materializes asset with ID: {lonely.pk}"},
    )
    assert (two.status_code, two.json()) == (
        409,
        {"detail": f"More than one Dag materializes asset with ID: {shared.pk}"},
    )
    assert admin_api.post("assets/x/materialize", b"").status_code == 404
    assert not DagRun.objects.exists()


@pytest.mark.parametrize("conf", [{"note": "a\u0000b"}, {"a\u0000": 1}, {"x": [{"y": "\u0000"}]}])
def test_a_conf_no_database_stores_is_400_on_trigger_and_materialize(admin_api, conf):
    """U+0000 anywhere in ``conf`` (PostgreSQL's jsonb refuses it): 400 naming ``conf``, no
    run, on both ways to make a run, never a 500."""
    asset = AssetFactory()
    producer = DagFactory(dag_id="producer", task_ids=["make"])
    TaskOutletAssetReference.objects.create(asset=asset, dag=producer, task_id="make")

    triggered = admin_api.post("dags/producer/dagRuns", {"logical_date": None, "conf": conf})
    materialized = admin_api.post(f"assets/{asset.pk}/materialize", {"conf": conf})

    for response in (triggered, materialized):
        assert response.status_code == 400, response.json()
        assert "conf" in str(response.json()["detail"])
    assert not DagRun.objects.exists()


# --- variables --------------------------------------------------------------------------------


def test_variable_crud_with_airflows_shapes(admin_api):
    created = admin_api.post("variables", {"key": "path/to", "value": {"a": 1, "token": SECRET}})
    plain = admin_api.post("variables", {"key": "db_password", "value": SECRET})
    again = admin_api.post("variables", {"key": "path/to", "value": "x"})
    one = admin_api.get("variables/path/to")
    listed = admin_api.get("variables", {"variable_key_pattern": "PATH", "order_by": "-key"})
    patched = admin_api.patch(
        "variables/path/to?update_mask=description",
        {"key": "path/to", "value": "ignored", "description": "about"},
    )

    assert created.status_code == 201, created.json()
    assert created.json() == {
        "key": "path/to",
        "value": json.dumps({"a": 1, "token": "***"}),
        "description": None,
        "is_encrypted": True,
        "team_name": None,
    }
    assert plain.json()["value"] == "***"
    assert (again.status_code, again.json()) == (
        409,
        {"detail": "The Variable with key: `path/to` already exists"},
    )
    assert one.json()["value"] == created.json()["value"]
    assert [v["key"] for v in listed.json()["variables"]] == ["path/to"]
    assert listed.json()["total_entries"] == 1
    assert patched.json()["description"] == "about"
    # stored: the JSON text Airflow stores (indent=2), encrypted; the mask changed nothing
    assert json.loads(variable_value(Variable.objects.get(key="path/to"))) == {
        "a": 1,
        "token": SECRET,
    }
    assert SECRET not in admin_api.get("variables").content.decode()

    assert admin_api.delete("variables/path/to").status_code == 204
    missing = admin_api.delete("variables/path/to")
    assert (missing.status_code, missing.json()) == (
        404,
        {"detail": "The Variable with key: `path/to` was not found"},
    )


def test_variable_patch_value_and_refusals(admin_api):
    variable_set(key="k", value="old", description="kept")
    value = admin_api.patch("variables/k", {"key": "k", "value": 42})
    assert value.json()["value"] == "42"
    assert Variable.objects.get(key="k").description == "kept"  # not sent: not written
    wrong_key = admin_api.patch("variables/k", {"key": "other", "value": 1})
    immutable = admin_api.patch("variables/k?update_mask=key", {"key": "k", "value": 1})
    teams = admin_api.post("variables", {"key": "t", "value": "v", "team_name": "x"})
    no_value = admin_api.post("variables", {"key": "t"})
    assert wrong_key.status_code == 400
    assert immutable.status_code == 400
    assert "immutable" in immutable.json()["detail"]
    assert teams.status_code == 422
    assert no_value.json()["detail"][0]["loc"] == ["body", "value"]
    assert admin_api.get("variables/nope").status_code == 404
    assert list(Variable.objects.values_list("key", flat=True)) == ["k"]


# --- connections ------------------------------------------------------------------------------


def test_connection_crud_masks_the_password_and_extra(admin_api):
    body = {
        "connection_id": "warehouse",
        "conn_type": "postgres",
        "host": "db.example.com",
        "schema": "analytics",
        "login": "etl",
        "port": 5432,
        "password": SECRET,
        "extra": json.dumps({"sslmode": "require", "api_token": SECRET}),
    }
    created = admin_api.post("connections", body)
    duplicate = admin_api.post("connections", body)
    one = admin_api.get("connections/warehouse")
    listed = admin_api.get("connections", {"connection_id_prefix_pattern": "ware"})

    assert created.status_code == 201, created.json()
    assert created.json() == {
        **body,
        "password": "***",
        "extra": json.dumps({"sslmode": "require", "api_token": "***"}),
        "description": None,
        "team_name": None,
    }
    assert duplicate.status_code == 409
    assert duplicate.json()["detail"]["reason"] == "Unique constraint violation"
    assert one.json() == created.json()
    assert [c["connection_id"] for c in listed.json()["connections"]] == ["warehouse"]
    for response in (created, duplicate, one, listed):
        assert SECRET not in response.content.decode()


def test_a_patch_sending_back_the_masks_keeps_the_secrets(admin_api):
    # given a connection, read back masked
    connection_create(
        conn_id="c",
        values=ConnectionFields(
            conn_type="http", password=SECRET, extra=json.dumps({"token": SECRET, "n": 1})
        ),
    )
    read = admin_api.get("connections/c").json()
    # when the client changes the host and sends everything else back as it read it
    patched = admin_api.patch("connections/c", {**read, "host": "new.example.com"})
    # then the secrets are as stored, the rest changed
    assert patched.status_code == 200, patched.json()
    secrets = connection_secrets(connection_get(conn_id="c"))
    assert secrets.password == SECRET
    assert json.loads(secrets.extra or "") == {"token": SECRET, "n": 1}
    assert Connection.objects.get().host == "new.example.com"
    # a mask narrows the write; a null password clears it
    admin_api.patch("connections/c?update_mask=password", {"connection_id": "c", "conn_type": "x"})
    assert Connection.objects.get().conn_type == "http"
    cleared = admin_api.patch(
        "connections/c", {"connection_id": "c", "conn_type": "http", "password": None}
    )
    assert cleared.json()["password"] is None


@pytest.mark.parametrize(
    ("body", "loc"),
    [
        pytest.param(
            {"connection_id": "a b", "conn_type": "x"}, ["body", "connection_id"], id="id"
        ),
        pytest.param(
            {"connection_id": "a", "conn_type": "x", "port": "1"}, ["body", "port"], id="port"
        ),
        pytest.param({"connection_id": "a"}, ["body", "conn_type"], id="type"),
    ],
)
def test_connection_bad_bodies_are_422_and_write_nothing(admin_api, body, loc):
    response = admin_api.post("connections", body)
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == loc
    assert not Connection.objects.exists()


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        pytest.param({"extra": "[1]"}, "extra must be a JSON object", id="extra-list"),
        pytest.param({"extra": "\u00bb"}, "extra must be the JSON text", id="extra-text"),
        pytest.param({"port": 70000}, "port must be between 0 and 65535", id="port-range"),
        pytest.param({"conn_type": ""}, "conn_type must not be empty", id="empty-type"),
        pytest.param({"host": "h" * 501}, "host must be at most 500", id="long-host"),
    ],
)
def test_connection_values_the_database_cannot_hold_are_400(admin_api, body, fragment):
    response = admin_api.post("connections", {"connection_id": "a", "conn_type": "x", **body})
    assert response.status_code == 400
    assert fragment in response.json()["detail"]
    assert not Connection.objects.exists()


def test_secrets_need_their_model_permissions(db):
    variable_set(key="k", value="v")
    group = Group.objects.create(name="secret-readers")
    group.permissions.set(
        Permission.objects.filter(codename__in=["view_variable", "view_connection"])
    )
    user = User.objects.create_user("reader", password="pw")
    user.groups.add(group)
    reader = Api(user_token_issue(user=user))
    assert reader.get("variables").status_code == 200
    refused = [
        reader.post("variables", {"key": "n", "value": "v"}),
        reader.patch("variables/k", {"key": "k", "value": "changed"}),
        reader.delete("variables/k"),
        reader.post("connections", {"connection_id": "c", "conn_type": "x"}),
    ]
    assert [r.status_code for r in refused] == [403] * 4
    assert variable_value(Variable.objects.get()) == "v"
    assert not Connection.objects.exists()
    assert Api(None).get("connections").status_code == 401
