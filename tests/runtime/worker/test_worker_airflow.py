"""``manage.py worker`` runs a task of a real Airflow DAG file through Airflow's own worker
entry point (``runtime/airflow_task.py``: Airflow's ``execute_workload``). Skipped without
``apache-airflow-task-sdk``."""

from __future__ import annotations

import json

import pytest

from assets_app.models import AssetEvent, TaskInstance
from tests.executionapi.conftest import airflow_sdk  # noqa: F401 (a fixture)
from tests.executionapi.test_real_worker import DAG_FILE, DAG_ID, DAGS_DIR, PRODUCED
from tests.runtime.worker.conftest import declare, scheduled_task_instances

pytestmark = pytest.mark.slow


def test_an_airflow_dag_file_task_runs_through_airflows_worker(
    airflow_sdk,  # noqa: F811
    start_worker,
    tmp_path,
):
    # given the DAG file's DAG declared with its file, and a runnable instance of one task
    declare(
        [
            {
                "dag_id": DAG_ID,
                "airflow_dag_file": DAG_FILE,
                "tasks": [
                    {"task_id": "produce", "outlets": [{"asset": PRODUCED}]},
                    {"task_id": "produce_through_alias"},
                    {"task_id": "read_inlet_events"},
                ],
            }
        ],
        base_dir=DAGS_DIR,
    )
    (ti,) = scheduled_task_instances(DAG_ID, "produce", 1)

    # when a worker runs it
    worker = start_worker(
        "--once",
        env={
            "AIRFLOW_HOME": str(tmp_path / "airflow_home"),
            "AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": "1",
        },
    )

    # then Airflow's supervisor ran the task against the registry: success, its event recorded
    assert worker.wait(timeout=240) == 0, worker.output()
    ti.refresh_from_db()
    assert ti.state == "success", worker.output()
    assert ti.last_heartbeat_at is not None
    event = AssetEvent.objects.get()
    assert event.asset.name == PRODUCED["name"]
    assert event.extra == {"rows": 3, "source": "real-worker"}
    assert (event.source_dag_id, event.source_task_id, event.source_run_id) == (
        DAG_ID,
        "produce",
        ti.run_id,
    )
    assert f"finished {DAG_ID}.produce @ {ti.run_id} try 1: success" in worker.output()
    assert TaskInstance.objects.get(pk=ti.pk).rendered_fields  # Airflow's /rtif call
    # the task instance's log holds each of the task's log lines once (Airflow's
    # execute_workload would copy every forwarded line to stdout a second time)
    (log,) = (tmp_path / "task_logs").rglob("attempt=1.log")
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    task_lines = [line for line in lines if line.get("logger") == "task" or "ti_id" in line]
    assert task_lines, log.read_text()
    seen = [(line["timestamp"], line["event"]) for line in task_lines]
    assert len(seen) == len(set(seen)), log.read_text()
    assert any("Done. Returned value was" in event for _, event in seen), log.read_text()
