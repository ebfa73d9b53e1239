"""A DAG file in a subfolder of the DAGs folder, importing a module from the folder's top (as
Airflow puts ``dags_folder`` on ``sys.path``): loaded by ``declare_dags --dags-folder``, its
task runs under a real ``manage.py worker`` with the loaded folder as Airflow's
``dags_folder``, not the file's own folder. Skipped without Airflow's task SDK and core."""

from __future__ import annotations

import importlib.util
import textwrap

import pytest

from assets_app.models import DagRun, DagTask, TaskInstance
from assets_app.services.dags.declare import dags_set_paused
from assets_app.services.runs.dag_runs import dag_run_trigger
from tests.executionapi.conftest import airflow_sdk  # noqa: F401 (a fixture)
from tests.runtime.worker.conftest import dags_folder_load, wait_until

pytestmark = pytest.mark.slow

if importlib.util.find_spec("airflow.example_dags") is None:  # pragma: no cover
    pytest.skip("apache-airflow-core is not installed", allow_module_level=True)

DAG_ID = "subfolder_pipeline"

SHARED = """
GREETING = "hello from the dags folder's top"
"""

PIPELINE = """
from datetime import datetime

from airflow.sdk import dag, task

from shared.names import GREETING


@dag(dag_id="subfolder_pipeline", schedule=None, start_date=datetime(2026, 1, 1))
def pipeline():
    @task
    def greet():
        print(GREETING)
        return GREETING

    @task
    def check(greeting):
        assert greeting == GREETING, greeting

    check(greet())


pipeline()
"""


def test_a_dag_file_in_a_subfolder_imports_from_the_folders_top(
    airflow_sdk,  # noqa: F811
    start_worker,
    settings,
    tmp_path,
):
    # given a DAGs folder with a shared module at its top and a DAG file in a subfolder
    dags_folder = tmp_path / "dags"
    (dags_folder / "shared").mkdir(parents=True)
    (dags_folder / "shared" / "__init__.py").write_text("")
    (dags_folder / "shared" / "names.py").write_text(textwrap.dedent(SHARED))
    (dags_folder / "teams" / "sales").mkdir(parents=True)
    dag_file = dags_folder / "teams" / "sales" / "pipeline.py"
    dag_file.write_text(textwrap.dedent(PIPELINE))
    out = dags_folder_load(dags_folder, settings=settings, parser_home=tmp_path / "parser_home")
    assert set(DagTask.objects.values_list("airflow_dag_file", "airflow_dags_folder")) == {
        (str(dag_file.resolve()), str(dags_folder.resolve()))
    }, out
    dags_set_paused(dag_ids=[DAG_ID], is_paused=False)

    # when it is triggered and a real worker runs its tasks
    worker = start_worker(
        env={
            "AIRFLOW_HOME": str(tmp_path / "airflow_home"),
            "AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": "1",
        },
    )
    run = dag_run_trigger(dag_id=DAG_ID, run_id="manual__subfolder")
    try:
        wait_until(
            lambda: DagRun.objects.get(pk=run.pk).state in ("success", "failed"),
            timeout=300,
            what=f"the run\n{worker.output()}",
        )
    finally:
        worker.process.terminate()
        worker.wait(timeout=60)

    # then both tasks imported the shared module and succeeded, the value passed as an XCom
    assert set(TaskInstance.objects.values_list("task_id", "state")) == {
        ("greet", "success"),
        ("check", "success"),
    }, worker.output()
    (log,) = (tmp_path / "task_logs" / DAG_ID).glob("*/greet/attempt=1.log")
    assert "hello from the dags folder's top" in log.read_text()
