"""A connection's password appears in no response, log line or admin page.

The connection is made and edited through the admin's forms, then read through every face:
the admin's list, change, history and delete pages, the operator API's list and detail,
``manage.py connections list``, and the execution API, the one answer that must carry it
(to the task). Every log record of the whole test, at DEBUG, is searched too.
"""

from __future__ import annotations

import io
import json
import logging

import pytest
from django.core.management import call_command

from assets_app.models import Connection, Variable
from assets_app.selectors.secrets import connection_get, connection_secrets
from tests.executionapi.conftest import client_for as runner_for
from tests.operatorapi.conftest import make_user, token_client

pytestmark = pytest.mark.django_db

PASSWORD = "Zq9-very-secret-password-7Lm"
EXTRA_SECRET = "xtra-secret-token-44Kp"
VARIABLE_SECRET = "var-secret-value-19Hd"


def test_the_password_is_nowhere_but_in_the_task_read(admin_client, make_ti, caplog):
    caplog.set_level(logging.DEBUG)
    add_url = "/admin/assets_app/connection/add/"

    # given a connection added through the admin, then edited with the password left blank
    added = admin_client.post(
        add_url,
        {
            "conn_id": "warehouse",
            "conn_type": "postgres",
            "host": "db.internal",
            "login": "etl",
            "port": "5432",
            "password": PASSWORD,
            "extra": json.dumps({"sslmode": "require", "api_token": EXTRA_SECRET}),
        },
    )
    assert added.status_code == 302, added.content.decode()[-2000:]
    pk = Connection.objects.get().pk
    change_url = f"/admin/assets_app/connection/{pk}/change/"
    edited = admin_client.post(
        change_url,
        {"conn_type": "postgres", "host": "db2.internal", "login": "etl", "port": "5432"},
    )
    assert edited.status_code == 302, edited.content.decode()[-2000:]
    secrets = connection_secrets(connection_get(conn_id="warehouse"))
    assert secrets.password == PASSWORD  # kept
    assert EXTRA_SECRET in (secrets.extra or "")
    admin_client.post(
        "/admin/assets_app/variable/add/", {"key": "db_password", "value": VARIABLE_SECRET}
    )
    assert Variable.objects.filter(key="db_password").exists()

    # when every face is read
    pages = {
        "admin list": admin_client.get("/admin/assets_app/connection/"),
        "admin search": admin_client.get("/admin/assets_app/connection/", {"q": "warehouse"}),
        "admin change": admin_client.get(change_url),
        "admin history": admin_client.get(f"/admin/assets_app/connection/{pk}/history/"),
        "admin delete": admin_client.get(f"/admin/assets_app/connection/{pk}/delete/"),
        "admin index": admin_client.get("/admin/"),
        "admin variables": admin_client.get("/admin/assets_app/variable/"),
        "admin variable change": admin_client.get(
            f"/admin/assets_app/variable/{Variable.objects.get().pk}/change/"
        ),
    }
    operator = token_client(
        make_user("reader", "view_connection", "view_variable", "change_connection")
    )
    pages["api list"] = operator.get("/api/v1/connections")
    pages["api detail"] = operator.get("/api/v1/connections/warehouse")
    pages["api patch"] = operator.patch(
        "/api/v1/connections/warehouse", {"description": "x"}, format="json"
    )
    pages["api bad patch"] = operator.patch(
        "/api/v1/connections/warehouse", {"port": PASSWORD}, format="json"
    )
    pages["api variables"] = operator.get("/api/v1/variables")
    runner = runner_for(make_ti())
    task_read = runner.get("/execution/connections/warehouse")
    pages["task variable list"] = runner.get("/execution/variables/keys")
    out = io.StringIO()
    call_command("connections", "list", "--json", stdout=out)
    call_command("connections", "list", stdout=out)
    call_command("variables", "list", "--json", stdout=out)

    # then the secrets are in no page, answer, command output or log record
    for name, response in pages.items():
        assert response.status_code < 500, name
        text = response.content.decode()
        for secret in (PASSWORD, EXTRA_SECRET, VARIABLE_SECRET):
            assert secret not in text, f"{name} shows a secret"
    for secret in (PASSWORD, EXTRA_SECRET, VARIABLE_SECRET):
        assert secret not in out.getvalue()
        assert secret not in caplog.text
        for record in caplog.records:
            assert secret not in record.getMessage()
    # except the task's own read, which must carry them
    assert task_read.json()["password"] == PASSWORD
    assert EXTRA_SECRET in task_read.json()["extra"]
