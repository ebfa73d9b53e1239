"""GET/PUT/DELETE /execution/variables/{key}, GET /execution/variables/keys and
GET /execution/connections/{id}: Airflow 3.3.2's shapes, codes and error bodies."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from assets_app.models import TaskInstanceState, Variable
from assets_app.selectors.secrets import variable_get, variable_value
from assets_app.services.secrets.connections import ConnectionFields, connection_create
from assets_app.services.secrets.variables import variable_set
from tests.executionapi.conftest import client_for

pytestmark = pytest.mark.django_db


def test_variable_put_get_delete(make_ti):
    # given a running task's client
    client = client_for(make_ti())

    # when it sets, reads and deletes a variable whose key holds a slash
    put = client.put(
        "/execution/variables/team/a", {"value": "v1", "description": "d"}, format="json"
    )
    put_alias = client.put("/execution/variables/other", {"val": ""}, format="json")
    got = client.get("/execution/variables/team/a")
    empty = client.get("/execution/variables/other")
    deleted = client.delete("/execution/variables/team/a")
    deleted_again = client.delete("/execution/variables/team/a")
    missing = client.get("/execution/variables/team/a")

    # then Airflow's codes and bodies
    assert (put.status_code, put.json()) == (201, {"message": "Variable successfully set"})
    assert put_alias.status_code == 201
    assert (got.status_code, got.json()) == (200, {"key": "team/a", "value": "v1"})
    assert empty.json() == {"key": "other", "value": ""}
    assert (deleted.status_code, deleted_again.status_code) == (204, 204)
    assert missing.status_code == 404
    assert missing.json() == {
        "detail": {"reason": "not_found", "message": "Variable with key 'team/a' not found"}
    }


def test_variable_value_is_stored_encrypted(make_ti):
    client = client_for(make_ti())

    client.put("/execution/variables/k", {"value": "plain-secret-value"}, format="json")

    row = Variable.objects.get(key="k")
    assert row.is_encrypted
    assert "plain-secret-value" not in (row.encrypted_val or "")
    assert variable_value(variable_get(key="k")) == "plain-secret-value"


def test_variable_put_replaces_value_and_description(make_ti):
    client = client_for(make_ti())
    client.put("/execution/variables/k", {"value": "1", "description": "old"}, format="json")

    client.put("/execution/variables/k", {"value": None}, format="json")

    row = Variable.objects.get(key="k")
    assert (row.encrypted_val, row.description) == (None, None)
    assert client.get("/execution/variables/k").json() == {"key": "k", "value": None}


@pytest.mark.parametrize(
    ("body", "loc", "type_"),
    [
        pytest.param({}, ["body", "val"], "missing", id="no-value"),
        pytest.param({"value": 5}, ["body", "value"], "string_type", id="number"),
        pytest.param({"value": "x", "other": 1}, ["body", "other"], "extra_forbidden", id="extra"),
        pytest.param(
            {"value": "a\x00b"}, ["body", "value"], "null_characters_not_allowed", id="nul"
        ),
        pytest.param('{"value": "\\ud800"}', ["body", "value"], "string_unicode", id="surrogate"),
        pytest.param(
            {"value": "x", "description": 3}, ["body", "description"], "string_type", id="descr"
        ),
        pytest.param([1], ["body"], "dict_type", id="not-object"),
    ],
)
def test_variable_put_bad_body_is_a_422(make_ti, body, loc, type_):
    client = client_for(make_ti())

    if isinstance(body, str):  # raw JSON text (a lone surrogate cannot be encoded otherwise)
        response = client.put("/execution/variables/k", body, content_type="application/json")
    else:
        response = client.put("/execution/variables/k", body, format="json")

    assert response.status_code == 422
    assert {(tuple(e["loc"]), e["type"]) for e in response.json()["detail"]} >= {
        (tuple(loc), type_)
    }
    assert not Variable.objects.exists()


def test_variable_put_bad_key_is_a_422_and_get_of_it_a_404(make_ti):
    client = client_for(make_ti())

    long_put = client.put("/execution/variables/" + "k" * 251, {"value": "x"}, format="json")
    long_get = client.get("/execution/variables/" + "k" * 251)
    nul_get = client.get("/execution/variables/a%00b")
    nul_delete = client.delete("/execution/variables/a%00b")

    assert long_put.status_code == 422
    assert long_put.json()["detail"][0]["loc"] == ["path", "variable_key"]
    assert (long_get.status_code, nul_get.status_code, nul_delete.status_code) == (404, 404, 204)
    assert not Variable.objects.exists()


def test_variable_writes_need_a_running_task_instance(make_ti):
    # given a token of a task instance that has finished, and one of none at all
    finished = client_for(make_ti(state=TaskInstanceState.SUCCESS))
    variable_set(key="k", value="kept")

    # when they write
    put = finished.put("/execution/variables/k", {"value": "overwritten"}, format="json")
    delete = finished.delete("/execution/variables/k")
    read = finished.get("/execution/variables/k")

    # then nothing is written, reads still work
    assert (put.status_code, delete.status_code) == (403, 403)
    assert put.json()["detail"]["reason"] == "access_denied"
    assert read.json() == {"key": "k", "value": "kept"}


def test_variable_keys_prefix_and_pages(make_ti):
    client = client_for(make_ti())
    for key in ("a_1", "a_2", "a%x", "b_1"):
        variable_set(key=key, value="v")

    everything = client.get("/execution/variables/keys")
    prefixed = client.get("/execution/variables/keys", {"prefix": "a_", "limit": 1, "offset": 1})
    literal = client.get("/execution/variables/keys", {"prefix": "a%"})
    nul = client.get("/execution/variables/keys", {"prefix": "a\x00"})
    bad = client.get("/execution/variables/keys", {"limit": 0, "offset": -1})

    assert everything.json() == {"keys": ["a%x", "a_1", "a_2", "b_1"], "total_entries": 4}
    assert prefixed.json() == {"keys": ["a_2"], "total_entries": 2}
    assert literal.json() == {"keys": ["a%x"], "total_entries": 1}
    assert nul.status_code == 422
    assert nul.json()["detail"][0]["loc"] == ["query", "prefix"]
    assert bad.status_code == 422
    assert {tuple(e["loc"]) for e in bad.json()["detail"]} == {
        ("query", "limit"),
        ("query", "offset"),
    }


def test_connection_get_returns_the_decrypted_secrets(make_ti):
    connection_create(
        conn_id="my_db",
        values=ConnectionFields(
            conn_type="postgres",
            host="db.example",
            schema="public",
            login="me",
            password="s3cr3t-pass",
            port=5432,
            extra='{"sslmode": "require"}',
        ),
    )
    client = client_for(make_ti(state=TaskInstanceState.SUCCESS))  # reads need a valid token only

    got = client.get("/execution/connections/my_db")
    missing = client.get("/execution/connections/nope")
    nul = client.get("/execution/connections/a%00")

    assert got.status_code == 200
    assert got.json() == {
        "conn_id": "my_db",
        "conn_type": "postgres",
        "host": "db.example",
        "schema": "public",
        "login": "me",
        "password": "s3cr3t-pass",
        "port": 5432,
        "extra": '{"sslmode": "require"}',
    }
    assert missing.status_code == 404
    assert missing.json() == {
        "detail": {"reason": "not_found", "message": "Connection with ID nope not found"}
    }
    assert nul.status_code == 404


@pytest.mark.parametrize(
    "url", ["/execution/variables/k", "/execution/variables/keys", "/execution/connections/c"]
)
def test_secret_routes_need_a_valid_token(url):
    anonymous = APIClient().get(url)
    forged = APIClient(headers={"Authorization": "Bearer not.a.token"}).get(url)

    assert anonymous.status_code == 401
    assert forged.status_code == 403
