"""/api/v1/variables and /api/v1/connections: CRUD, permissions, write-only secrets."""

from __future__ import annotations

import json

import pytest

from assets_app.models import Connection, Variable
from assets_app.selectors.secrets import connection_get, connection_secrets, variable_get
from assets_app.selectors.secrets import variable_value as stored_value
from assets_app.services.secrets.connections import ConnectionFields, connection_create
from assets_app.services.secrets.variables import variable_set

pytestmark = pytest.mark.django_db

SECRET_PERMISSIONS = tuple(
    f"{verb}_{model}"
    for verb in ("view", "add", "change", "delete")
    for model in ("variable", "connection")
)
PASSWORD = "pa55-w0rd-hidden"


@pytest.fixture
def admin_api(client_for):
    return client_for("secrets-admin", *SECRET_PERMISSIONS)


def test_connection_create_get_list_mask_the_secrets(admin_api):
    # when an operator creates a connection with a password and a sensitive extra
    created = admin_api.post(
        "/api/v1/connections",
        {
            "conn_id": "warehouse",
            "conn_type": "postgres",
            "host": "db",
            "login": "etl",
            "password": PASSWORD,
            "port": 5432,
            "extra": {"sslmode": "require", "api_token": "tok-hidden-123", "nested": {"secret": 1}},
        },
        format="json",
    )
    one = admin_api.get("/api/v1/connections/warehouse")
    listed = admin_api.get("/api/v1/connections")

    # then the answers never carry the secrets; the row holds them encrypted
    assert created.status_code == 201, created.json()
    assert created["Location"].endswith("/api/v1/connections/warehouse")
    for response in (created, one, listed):
        assert PASSWORD not in response.content.decode()
        assert "tok-hidden-123" not in response.content.decode()
    body = one.json()
    assert body["password"] == "***"
    assert json.loads(body["extra"]) == {
        "sslmode": "require",
        "api_token": "***",
        "nested": {"secret": "***"},
    }
    assert [c["conn_id"] for c in listed.json()["results"]] == ["warehouse"]
    row = Connection.objects.get()
    assert PASSWORD not in (row.encrypted_password or "")
    assert (row.is_encrypted, row.is_extra_encrypted) == (True, True)
    assert connection_secrets(row).password == PASSWORD


def test_connection_update_keeps_password_and_masked_extra(admin_api):
    connection_create(
        conn_id="c",
        values=ConnectionFields(
            conn_type="http", password=PASSWORD, extra='{"token": "t-1", "a": 1}'
        ),
    )
    masked_extra = admin_api.get("/api/v1/connections/c").json()["extra"]

    # when the masked extra is sent back with a change, and the password left out
    patched = admin_api.patch(
        "/api/v1/connections/c",
        {"host": "new-host", "extra": json.loads(masked_extra) | {"a": 2}},
        format="json",
    )

    # then the hidden values are kept
    assert patched.status_code == 200, patched.json()
    secrets = connection_secrets(connection_get(conn_id="c"))
    assert secrets.password == PASSWORD
    assert json.loads(secrets.extra or "") == {"token": "t-1", "a": 2}
    assert connection_get(conn_id="c").host == "new-host"

    # and a null password clears it
    admin_api.patch("/api/v1/connections/c", {"password": None}, format="json")
    assert connection_secrets(connection_get(conn_id="c")).password is None
    assert admin_api.get("/api/v1/connections/c").json()["password"] is None


@pytest.mark.parametrize(
    ("body", "field"),
    [
        pytest.param({"conn_type": "x"}, "conn_id", id="no-id"),
        pytest.param({"conn_id": "a b", "conn_type": "x"}, "conn_id", id="bad-char"),
        pytest.param({"conn_id": "a", "conn_type": "x", "port": 70000}, "port", id="port"),
        pytest.param({"conn_id": "a", "conn_type": "x", "extra": "[1]"}, "extra", id="extra-list"),
        pytest.param({"conn_id": "a", "conn_type": "x", "extra": "{"}, "extra", id="extra-json"),
        pytest.param({"conn_id": "a", "conn_type": "x", "host": "a\x00"}, "host", id="nul"),
        pytest.param({"conn_id": "a", "conn_type": "x", "pasword": "x"}, "pasword", id="typo"),
        pytest.param({"conn_id": "a", "conn_type": 5}, "conn_type", id="type"),
    ],
)
def test_connection_bad_input_is_a_400_naming_the_field(admin_api, body, field):
    response = admin_api.post("/api/v1/connections", body, format="json")

    assert response.status_code == 400
    assert field in response.json(), response.json()
    assert not Connection.objects.exists()


def test_connection_conflict_missing_and_delete(admin_api):
    connection_create(conn_id="c", values=ConnectionFields(conn_type="http"))

    again = admin_api.post("/api/v1/connections", {"conn_id": "c", "conn_type": "x"}, format="json")
    missing = admin_api.get("/api/v1/connections/nope")
    nul = admin_api.get("/api/v1/connections/a%00b")
    deleted = admin_api.delete("/api/v1/connections/c")
    deleted_again = admin_api.delete("/api/v1/connections/c")

    assert (again.status_code, again.json()["code"]) == (409, "connection_exists")
    assert (missing.status_code, nul.status_code) == (404, 404)
    assert (deleted.status_code, deleted_again.status_code) == (204, 404)
    assert not Connection.objects.exists()


def test_variable_crud_and_masking(admin_api):
    created = admin_api.post(
        "/api/v1/variables", {"key": "path/to", "value": {"a": 1, "password": "x"}}, format="json"
    )
    sensitive = admin_api.post(
        "/api/v1/variables", {"key": "db_password", "value": "hunter2-secret"}, format="json"
    )
    duplicate = admin_api.post("/api/v1/variables", {"key": "path/to", "value": "x"}, format="json")
    patched = admin_api.patch("/api/v1/variables/path/to", {"description": "about"}, format="json")
    listed = admin_api.get("/api/v1/variables", {"key_prefix": "path"})

    assert created.status_code == 201, created.json()
    assert json.loads(created.json()["value"]) == {"a": 1, "password": "***"}
    assert sensitive.json()["value"] == "***"
    assert "hunter2-secret" not in admin_api.get("/api/v1/variables").content.decode()
    assert (duplicate.status_code, duplicate.json()["code"]) == (409, "variable_exists")
    assert patched.json()["description"] == "about"
    assert stored_value(variable_get(key="path/to")) == '{"a": 1, "password": "x"}'
    assert [v["key"] for v in listed.json()["results"]] == ["path/to"]

    assert admin_api.delete("/api/v1/variables/path/to").status_code == 204
    assert admin_api.get("/api/v1/variables/path/to").status_code == 404
    assert list(Variable.objects.values_list("key", flat=True)) == ["db_password"]


def test_secrets_need_their_model_permissions(client_for):
    variable_set(key="k", value="v")
    reader = client_for("reader", "view_variable", "view_connection")
    nobody = client_for("nobody")

    assert reader.get("/api/v1/variables/k").status_code == 200
    denied = reader.patch("/api/v1/variables/k", {"value": "w"}, format="json")
    assert denied.status_code == 403
    assert "assets_app.change_variable" in denied.json()["detail"]
    assert reader.post("/api/v1/connections", {"conn_id": "c", "conn_type": "x"}).status_code == 403
    assert nobody.get("/api/v1/connections").status_code == 403
    assert stored_value(variable_get(key="k")) == "v"
    assert not Connection.objects.exists()
