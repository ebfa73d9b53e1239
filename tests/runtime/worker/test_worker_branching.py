"""A real Airflow DAG file that branches (``@task.branch``) and short-circuits
(``@task.short_circuit``), run by ``manage.py worker`` with the real task SDK: the branch not
taken and everything after the short-circuit are ``skipped`` (``PATCH …/skip-downstream``),
the tasks run in their DAG's order, and the run succeeds. Skipped without
``apache-airflow-task-sdk``."""

from __future__ import annotations

import pytest

from assets_app.models import DagRun, TaskInstance, XCom
from assets_app.services.runs.dag_runs import dag_run_trigger
from tests.executionapi.conftest import airflow_sdk  # noqa: F401 (a fixture)
from tests.executionapi.test_real_worker import DAGS_DIR
from tests.runtime.worker.conftest import declare, wait_until

pytestmark = pytest.mark.slow

#: the DAG file's DAG as the registry knows it (what the DAG-file loader would declare)
BRANCHING = {
    "dag_id": "registry_branching",
    "airflow_dag_file": "registry_branch_dag.py",
    "tasks": [
        {"task_id": "extract"},
        {"task_id": "choose", "upstream": ["extract"]},
        {"task_id": "small", "upstream": ["choose"]},
        {"task_id": "large", "upstream": ["choose"]},
        {
            "task_id": "join",
            "upstream": ["small", "large"],
            "trigger_rule": "none_failed_min_one_success",
        },
        {"task_id": "worth_reporting", "upstream": ["join"]},
        {"task_id": "report", "upstream": ["worth_reporting"]},
    ],
}


def test_a_branching_dag_file_runs_in_order_and_skips_what_its_branches_leave_out(
    airflow_sdk,  # noqa: F811
    start_worker,
    tmp_path,
):
    # given the DAG declared and triggered
    declare([BRANCHING], base_dir=DAGS_DIR)
    run = dag_run_trigger(dag_id="registry_branching", run_id="manual__branching")

    # when a worker runs what becomes runnable, task after task
    worker = start_worker(
        env={
            "AIRFLOW_HOME": str(tmp_path / "airflow_home"),
            "AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": "1",
        },
    )
    try:
        wait_until(
            lambda: DagRun.objects.get(pk=run.pk).state in ("success", "failed"),
            timeout=400,
            what=f"the run to finish\n{worker.output()}",
        )
    finally:
        worker.process.terminate()
        worker.wait(timeout=60)

    # then the branch not taken and the short-circuited task were skipped, the rest succeeded
    states = dict(TaskInstance.objects.filter(dag_run=run).values_list("task_id", "state"))
    assert states == {
        "extract": "success",
        "choose": "success",
        "small": "success",
        "large": "skipped",
        "join": "success",
        "worth_reporting": "success",
        "report": "skipped",
    }, worker.output()
    assert DagRun.objects.get(pk=run.pk).state == "success"
    # each task started after its upstreams ended; choose read extract's XCom
    tis = {ti.task_id: ti for ti in TaskInstance.objects.filter(dag_run=run)}
    for task in BRANCHING["tasks"]:
        for upstream in task.get("upstream", []):
            if tis[task["task_id"]].state == "success":
                assert tis[upstream].end_date <= tis[task["task_id"]].start_date, task
    xcoms = dict(
        XCom.objects.filter(dag_run=run, key="return_value").values_list("task_id", "value")
    )
    assert xcoms["extract"] == {"rows": 3}
    assert xcoms["small"] == "small path"
