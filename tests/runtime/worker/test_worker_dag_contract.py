"""Issue 37, item 1, with real processes: a DAG file using an attribute the contract refuses
(``runtime/dag_contract.py``) is an import error naming the DAG, the task and the attribute,
shown by ``declare_dags``, and its DAG never runs, while the good file beside it runs under a
real ``manage.py worker`` and scheduler passes. Skipped without Airflow's task SDK and core."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from assets_app.exceptions import DagNotFoundError
from assets_app.models import Dag, DagImportError, DagRun, TaskInstance
from assets_app.services.runs.dag_runs import dag_run_trigger
from assets_app.services.scheduling.scheduler import scheduler_pass
from assets_app.services.scheduling.time_schedules import dags_time_scheduled_runs_create
from tests.executionapi.conftest import airflow_sdk  # noqa: F401 (a fixture)
from tests.runtime.worker.conftest import wait_until

pytestmark = pytest.mark.slow

if importlib.util.find_spec("airflow.example_dags") is None:  # pragma: no cover
    pytest.skip("apache-airflow-core is not installed", allow_module_level=True)

PIPELINE = """
from datetime import datetime, timezone
from pathlib import Path

from airflow.sdk import DAG, task

with DAG(
    dag_id="{dag_id}",
    schedule="@once",
    start_date=datetime(2026, 1, 1, tzinfo=timezone.utc),
    is_paused_upon_creation=False,
):

    @task({task_kwargs})
    def work():
        Path({marker!r}).write_text("ran")

    work()
"""

REFUSAL = (
    "DAG 'contract_refused', task 'work', attribute 'run_as_user': impersonation is not "
    "supported by the registry (tasks run as the worker's user)"
)


def test_a_dag_file_using_a_refused_attribute_is_an_import_error_and_never_runs(
    airflow_sdk,  # noqa: F811
    start_worker,
    settings,
    tmp_path,
):
    # given a DAGs folder with a good file and one whose task runs as another user, both @once and
    # unpaused at creation
    folder = tmp_path / "dags"
    folder.mkdir()
    markers = {name: tmp_path / f"{name}.ran" for name in ("good", "refused")}
    for name, task_kwargs in (("good", ""), ("refused", "run_as_user='nobody'")):
        (folder / f"{name}.py").write_text(
            textwrap.dedent(PIPELINE).format(
                dag_id=f"contract_{name}", task_kwargs=task_kwargs, marker=str(markers[name])
            )
        )

    # when the folder is loaded
    settings.DAG_PARSER_HOME = tmp_path / "parser_home"
    settings.DAG_PARSER_PYTHON = sys.executable
    out, err = StringIO(), StringIO()
    with pytest.raises(CommandError, match=r"refused\.py"):
        call_command("declare_dags", "--dags-folder", str(folder), stdout=out, stderr=err)

    # then the refused file is an import error with the refusal, printed and stored; only
    # the good DAG is declared, and the refused one cannot be triggered
    assert f"import_error {folder / 'refused.py'}" in out.getvalue()
    assert REFUSAL in err.getvalue()
    (error,) = DagImportError.objects.all()
    assert (error.filename, error.stacktrace) == (str(folder / "refused.py"), REFUSAL)
    assert list(Dag.objects.values_list("dag_id", flat=True)) == ["contract_good"]
    with pytest.raises(DagNotFoundError):
        dag_run_trigger(dag_id="contract_refused")

    # when the scheduler and a real worker run what is due
    worker = start_worker(
        env={
            "AIRFLOW_HOME": str(tmp_path / "airflow_home"),
            "AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": "1",
        },
    )
    try:

        def good_run_finished() -> bool:
            dags_time_scheduled_runs_create()  # the scheduler's passes: time, then assets
            scheduler_pass()
            return DagRun.objects.filter(state__in=("success", "failed")).exists()

        wait_until(good_run_finished, timeout=300, what=f"the good run\n{worker.output()}")
        for _ in range(3):  # more passes: nothing else becomes due
            assert not dags_time_scheduled_runs_create().created
            scheduler_pass()
    finally:
        worker.process.terminate()
        worker.wait(timeout=60)

    # then the good DAG ran once, and the refused one never: no run, no task, no side effect
    assert list(DagRun.objects.values_list("dag_id", "state")) == [("contract_good", "success")]
    assert list(TaskInstance.objects.values_list("dag_id", "state")) == [
        ("contract_good", "success")
    ], worker.output()
    assert markers["good"].read_text() == "ran"
    assert not markers["refused"].exists()
