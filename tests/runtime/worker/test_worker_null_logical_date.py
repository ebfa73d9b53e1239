"""A run without a logical date (``/api/v2``'s ``"logical_date": null``, as Airflow 3 makes
it) runs its real Airflow DAG file's tasks to success under a real ``manage.py worker``: the
task context has no logical date, as Airflow's task SDK gives it (no ``ds``/``ts``), its
run id is ``manual__<run_after>``. Its ``default_args`` owner is its task's owner and its
DAG's owners on ``/api/v2``. Skipped without Airflow's task SDK and core."""

from __future__ import annotations

import importlib.util
import textwrap

import pytest
from django.contrib.auth.models import User

from assets_app.models import Dag, DagRun, DagTask, TaskInstance, XCom
from assets_app.services.dags.declare import dags_set_paused
from publicapi.auth import user_token_issue
from tests.executionapi.conftest import airflow_sdk  # noqa: F401 (a fixture)
from tests.publicapi.conftest import Api
from tests.runtime.worker.conftest import dags_folder_load, wait_until

pytestmark = pytest.mark.slow

if importlib.util.find_spec("airflow.dag_processing") is None:  # pragma: no cover
    pytest.skip("apache-airflow-core is not installed", allow_module_level=True)

DAGS = """
from datetime import datetime

from airflow.sdk import DAG, task

with DAG("undated", schedule=None, start_date=datetime(2026, 1, 1),
         default_args={"owner": "data-eng"}):
    @task
    def look(**context):
        return {
            "run_id": context["run_id"],
            "logical_date": repr(context.get("logical_date")),
            "ds": repr(context.get("ds")),
            "run_logical_date": repr(context["dag_run"].logical_date),
            "run_after": context["dag_run"].run_after.isoformat(),
        }
    look()
"""


def test_a_run_without_a_logical_date_runs_its_dag_file_task_to_success(
    airflow_sdk,  # noqa: F811
    start_worker,
    settings,
    tmp_path,
):
    folder = tmp_path / "dags"
    folder.mkdir()
    (folder / "undated.py").write_text(textwrap.dedent(DAGS))
    out = dags_folder_load(folder, settings=settings, parser_home=tmp_path / "parser_home")
    assert Dag.objects.filter(dag_id="undated").exists(), out
    dags_set_paused(dag_ids=["undated"], is_paused=False)
    api = Api(user_token_issue(user=User.objects.create_superuser("a", "a@example.com", "pw")))
    # the DAG file's default_args owner is its task's, and so its DAG's owners
    assert DagTask.objects.get(dag_id="undated", task_id="look").owner == "data-eng"
    assert api.get("dags/undated").json()["owners"] == ["data-eng"]
    assert api.get("dags/undated/tasks/look").json()["owner"] == "data-eng"

    response = api.post("dags/undated/dagRuns", {"logical_date": None})
    assert response.status_code == 200, response.json()
    run_id = response.json()["dag_run_id"]
    worker = start_worker(
        env={
            "AIRFLOW_HOME": str(tmp_path / "airflow_home"),
            "AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": "1",
        },
    )
    try:
        wait_until(
            lambda: DagRun.objects.get(dag_id="undated").state in ("success", "failed"),
            timeout=300,
            what=f"the run\n{worker.output()[-20000:]}",
        )
    finally:
        worker.process.terminate()
        worker.wait(timeout=60)

    run = DagRun.objects.get(dag_id="undated")
    assert run.state == "success", worker.output()[-20000:]
    assert run.logical_date is None
    assert run.run_id == run_id == f"manual__{run.run_after.isoformat()}"
    assert TaskInstance.objects.get(dag_id="undated").state == "success"
    seen = XCom.objects.get(dag_id="undated", task_id="look", key="return_value").value
    assert seen["run_id"] == run_id
    assert seen["run_logical_date"] == "None"
    assert seen["logical_date"] == "None"
    assert seen["ds"] == "None"  # Airflow's task SDK gives no ds without a logical date
