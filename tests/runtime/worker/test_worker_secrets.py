"""End to end: ``manage.py worker`` runs a real Airflow DAG file whose task reads variables
and a connection the server keeps, and writes a variable, with the real task SDK.
Skipped without ``apache-airflow-task-sdk``."""

from __future__ import annotations

import pytest

from assets_app.models import TaskInstance, XCom
from assets_app.selectors.secrets import variable_get, variable_value
from assets_app.services.secrets.connections import ConnectionFields, connection_create
from assets_app.services.secrets.variables import variable_set
from tests.executionapi.conftest import airflow_sdk  # noqa: F401 (a fixture)
from tests.executionapi.test_real_worker import DAGS_DIR
from tests.runtime.worker.conftest import declare, scheduled_task_instances

pytestmark = pytest.mark.slow

PASSWORD = "worker-e2e-pass-81Qz"


def test_a_dag_file_task_reads_variables_and_connections(
    airflow_sdk,  # noqa: F811
    start_worker,
    tmp_path,
):
    # given variables, a connection, and a runnable instance of the DAG file's task
    variable_set(key="greeting", value="hello")
    variable_set(key="config", value='{"rows": 3}')
    connection_create(
        conn_id="warehouse",
        values=ConnectionFields(
            conn_type="postgres",
            host="db.internal",
            login="etl",
            password=PASSWORD,
            port=5432,
            extra='{"sslmode": "require"}',
        ),
    )
    declare(
        [
            {
                "dag_id": "registry_secrets",
                "airflow_dag_file": "registry_secrets_dag.py",
                "tasks": [{"task_id": "use_secrets"}],
            }
        ],
        base_dir=DAGS_DIR,
    )
    (ti,) = scheduled_task_instances("registry_secrets", "use_secrets", 1)

    # when a worker runs it
    worker = start_worker(
        "--once",
        env={
            "AIRFLOW_HOME": str(tmp_path / "airflow_home"),
            "AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": "1",
        },
    )

    # then the task read what the server keeps, wrote its variable, and its log shows it
    assert worker.wait(timeout=240) == 0, worker.output()
    ti.refresh_from_db()
    logs = "\n".join(
        path.read_text(errors="replace")
        for path in (tmp_path / "task_logs").rglob("*")
        if path.is_file()
    )
    assert ti.state == "success", worker.output() + logs
    assert variable_value(variable_get(key="written_by_task")) == "hello from the task"
    assert "read variable greeting=hello config={'rows': 3} missing=fallback" in logs
    assert "read connection warehouse type=postgres host=db.internal login=etl port=5432" in logs
    assert "'sslmode': 'require'" in logs
    assert "BaseHook and Connection.get agree: True" in logs
    assert XCom.objects.get(task_id="use_secrets").value == {
        "password_length": len(PASSWORD),
        "agree": True,
    }
    # the SDK masks the password it received in the task's own log, and the worker's output
    # never holds it
    assert "the connection's password is ***" in logs
    assert PASSWORD not in logs
    assert PASSWORD not in worker.output()
    assert TaskInstance.objects.get(pk=ti.pk).state == "success"
