"""manage.py variables / connections / rotate_fernet_key."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import CommandError, call_command

from assets_app.models import Connection, Variable
from assets_app.selectors.secrets import (
    connection_get,
    connection_secrets,
    variable_get,
    variable_value,
)

pytestmark = pytest.mark.django_db


def run(*args: str, stdin: str | None = None, monkeypatch=None) -> str:
    out = io.StringIO()
    if stdin is not None and monkeypatch is not None:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    call_command(*args, stdout=out)
    return out.getvalue()


def test_variables_set_get_list_delete():
    assert "Variable greeting set" in run("variables", "set", "greeting", "hello")
    run("variables", "set", "cfg", '{"b": [1, 2], "a": null}', "--json", "--description", "d")

    assert run("variables", "get", "greeting") == "hello\n"
    assert json.loads(run("variables", "get", "cfg", "--json")) == {"b": [1, 2], "a": None}
    assert variable_value(variable_get(key="cfg")) == '{"b":[1,2],"a":null}'
    assert run("variables", "list") == "cfg\ngreeting\n"
    listed = json.loads(run("variables", "list", "--json"))
    assert listed == [
        {"key": "cfg", "description": "d", "is_encrypted": True},
        {"key": "greeting", "description": None, "is_encrypted": True},
    ]
    assert run("variables", "get", "nope", "--default", "fallback") == "fallback\n"
    assert "deleted" in run("variables", "delete", "greeting")
    assert list(Variable.objects.values_list("key", flat=True)) == ["cfg"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(("set", "k", "{bad", "--json"), "not valid JSON", id="bad-json"),
        pytest.param(("set", "", "v"), "key must not be empty", id="empty-key"),
        pytest.param(("set", "k" * 251, "v"), "at most 250", id="long-key"),
        pytest.param(("get", "nope"), "Variable with key 'nope' not found", id="get-missing"),
        pytest.param(("delete", "nope"), "Variable with key 'nope' not found", id="del-missing"),
    ],
)
def test_variables_bad_input_is_a_command_error(args, message):
    with pytest.raises(CommandError, match=message):
        run("variables", *args)
    assert not Variable.objects.exists()


def test_connections_add_list_delete(monkeypatch):
    run(
        "connections",
        "add",
        "pg",
        "--conn-type",
        "postgres",
        "--conn-host",
        "db",
        "--conn-port",
        "5432",
        "--conn-login",
        "me",
        "--conn-password-stdin",
        "--conn-extra",
        '{"sslmode": "require", "private_key": "pk-hidden"}',
        stdin="stdin-pass-hidden\n",
        monkeypatch=monkeypatch,
    )
    run(
        "connections",
        "add",
        "api",
        "--conn-json",
        '{"conn_type": "http", "host": "h", "password": "json-pass-hidden", "extra": {"a": 1}}',
    )

    listed = run("connections", "list")
    as_json = run("connections", "list", "--json")

    assert listed == "api\thttp\th\npg\tpostgres\tdb:5432\n"
    for text in (listed, as_json):
        assert "stdin-pass-hidden" not in text
        assert "json-pass-hidden" not in text
        assert "pk-hidden" not in text
    rows = {row["conn_id"]: row for row in json.loads(as_json)}
    assert rows["pg"]["password"] == "***"
    assert json.loads(rows["pg"]["extra"]) == {"sslmode": "require", "private_key": "***"}
    assert connection_secrets(connection_get(conn_id="pg")).password == "stdin-pass-hidden"
    assert connection_secrets(connection_get(conn_id="api")).extra == '{"a": 1}'

    run("connections", "delete", "pg")
    assert list(Connection.objects.values_list("conn_id", flat=True)) == ["api"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(("add", "c"), "--conn-type is required", id="no-type"),
        pytest.param(("add", "c d", "--conn-type", "x"), "conn_id may hold only", id="bad-id"),
        pytest.param(("add", "c", "--conn-type", "x", "--conn-port", "99999"), "port", id="port"),
        pytest.param(("add", "c", "--conn-type", "x", "--conn-extra", "[]"), "extra", id="extra"),
        pytest.param(("add", "c", "--conn-json", "{"), "not valid JSON", id="json"),
        pytest.param(("add", "c", "--conn-json", '{"typ": 1}'), "unknown keys typ", id="keys"),
        pytest.param(
            ("add", "c", "--conn-json", "{}", "--conn-host", "h"), "cannot be combined", id="mix"
        ),
        pytest.param(("delete", "nope"), "Connection with ID nope not found", id="missing"),
    ],
)
def test_connections_bad_input_is_a_command_error(args, message):
    with pytest.raises(CommandError, match=message):
        run("connections", *args)
    assert not Connection.objects.exists()


def test_connections_add_twice_is_refused():
    run("connections", "add", "c", "--conn-type", "x", "--conn-password", "first")

    with pytest.raises(CommandError, match="already exists"):
        run("connections", "add", "c", "--conn-type", "y", "--conn-password", "second")

    assert connection_secrets(connection_get(conn_id="c")).password == "first"
