"""The real Airflow task SDK client's ``variables`` and ``connections`` operations against a
live server process (the client in a subprocess, as in test_real_client.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from assets_app.models import TaskInstanceState, Variable
from assets_app.services.secrets.connections import ConnectionFields, connection_create
from assets_app.tokens import token_issue
from tests.executionapi.conftest import airflow_env

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SCRIPT = Path(__file__).with_name("real_client_secrets_script.py")


def test_real_client_reads_and_writes_variables_and_reads_connections(
    airflow_sdk, server, make_ti, tmp_path
):
    # given a connection with secrets, a running and a finished task instance
    connection_create(
        conn_id="warehouse",
        values=ConnectionFields(
            conn_type="postgres",
            host="db",
            schema="public",
            login="etl",
            password="real-client-pass",
            port=5432,
            extra='{"sslmode": "require"}',
        ),
    )
    running = make_ti()
    finished = make_ti(dag_id="other", state=TaskInstanceState.SUCCESS)

    # when the real client drives the routes
    result = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            f"{server.url}/execution",
            token_issue(task_instance_id=running.pk),
            token_issue(task_instance_id=finished.pk),
        ],
        env=airflow_env(tmp_path),
        capture_output=True,
        timeout=180,
        check=False,
    )

    # then every call got Airflow's answer
    assert result.returncode == 0, result.stderr.decode()[-3000:] + server.log()[-3000:]
    out = json.loads(result.stdout.decode().strip().splitlines()[-1])
    assert out["variable"] == {"key": "team/config", "value": "v1"}
    assert out["missing_variable"] == "VARIABLE_NOT_FOUND"
    assert out["keys"] == {"keys": ["team/config"], "total_entries": 1}
    assert out["after_delete"] == "VARIABLE_NOT_FOUND"
    assert out["connection"] == {
        "conn_id": "warehouse",
        "conn_type": "postgres",
        "host": "db",
        "schema": "public",
        "login": "etl",
        "password": "real-client-pass",
        "port": 5432,
        "extra": '{"sslmode": "require"}',
    }
    assert out["missing_connection"] == "CONNECTION_NOT_FOUND"
    assert out["bad_put"] == 422
    assert out["finished_put"] == 403
    assert out["finished_read"] == "warehouse"
    assert out["forged_read"] == "PERMISSION_DENIED"
    assert not Variable.objects.exists()
    assert "real-client-pass" not in server.log()
