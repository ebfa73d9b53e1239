"""A real Airflow 3 worker runs ``airflow_dags/registry_routes_dag.py`` against a live
registry: its tasks pull XComs (``ti.xcom_pull`` and a template), trigger a DAG with
``TriggerDagRunOperator`` and read other runs and tasks (``get_dr_count``,
``get_dagrun_state``, ``get_ti_count``, ``get_task_states``, ``get_previous_dagrun``,
``get_previous_ti``, ``get_dag``, ``get_task_breadcrumbs``), all through the execution API.

As in ``test_real_worker.py`` the installed task SDK's supervisor runs each task in its own
process (``real_worker_script.py``). Skipped when ``apache-airflow-task-sdk`` is not
installed.
"""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime

import pytest
import yaml
from django.core.management import call_command

from assets_app.models import DagRun, TaskInstance, XCom
from assets_app.services.runs.dag_runs import task_instance_create, task_instance_token_issue
from tests.executionapi.test_real_worker import failure_report, supervise
from tests.factories import DagRunFactory, TaskInstanceFactory

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

DAG_FILE = "registry_routes_dag.py"
DAG_ID = "registry_routes"
TARGET = "registry_routes_target"
TASKS = ("push", "pull", "templated", "trigger", "ask")
WORKER_TIMEOUT = 300

MANIFEST = {
    "dags": [
        {"dag_id": DAG_ID, "tasks": [{"task_id": task_id} for task_id in TASKS]},
        {"dag_id": TARGET, "tags": ["triggered"], "tasks": [{"task_id": "noop"}]},
    ]
}


def test_real_worker_tasks_pull_xcoms_trigger_a_dag_and_read_other_runs(
    airflow_sdk, server, tmp_path
):
    # given the two DAGs declared, an earlier successful run, and one queued instance per task
    manifest = tmp_path / "routes_dags.yaml"
    manifest.write_text(yaml.safe_dump(MANIFEST, sort_keys=False))
    call_command("declare_dags", str(manifest), stdout=io.StringIO())
    earlier = DagRunFactory(
        dag_id=DAG_ID,
        run_id="manual__earlier",
        logical_date=datetime(2026, 1, 1, tzinfo=UTC),
        state="success",
    )
    TaskInstanceFactory(dag_run=earlier, task_id="ask", state="success")
    run_id = "manual__routes"
    tis = []
    for task_id in TASKS:
        ti = task_instance_create(dag_id=DAG_ID, task_id=task_id, run_id=run_id).task_instance
        tis.append(
            {
                "id": str(ti.pk),
                "token": task_instance_token_issue(task_instance_id=ti.pk),
                "dag_id": DAG_ID,
                "task_id": task_id,
                "run_id": run_id,
                "try_number": ti.try_number,
                "map_index": -1,
            }
        )

    # when the real supervisor runs the five tasks one after the other
    result, log_dir = supervise(
        server, tmp_path, dag_file=DAG_FILE, tis=tis, timeout=WORKER_TIMEOUT
    )

    # then every task succeeded
    report = failure_report(result, server, log_dir)
    assert result.returncode == 0, report
    exit_codes = json.loads(result.stdout.strip().splitlines()[-1])
    assert [item["exit_code"] for item in exit_codes] == [0] * len(TASKS), report
    states = dict(
        TaskInstance.objects.filter(dag_id=DAG_ID, run_id=run_id).values_list("task_id", "state")
    )
    assert states == dict.fromkeys(TASKS, "success"), report
    xcoms = {(x.task_id, x.key): x.value for x in XCom.objects.filter(dag_id=DAG_ID, run_id=run_id)}

    # ti.xcom_pull: one task → its value, a list of tasks → a list, nothing pushed → None
    assert xcoms[("pull", "return_value")] == {
        "one": {"rows": 3},
        "many": [{"rows": 3}],
        "missing": None,
    }
    # the template's xcom_pull, rendered by the worker (and stored as a rendered field)
    assert xcoms[("templated", "return_value")] == "3 rows"
    templated = TaskInstance.objects.get(dag_id=DAG_ID, run_id=run_id, task_id="templated")
    assert templated.rendered_fields["op_kwargs"] == {"value": "3 rows"}

    # TriggerDagRunOperator: a run of the target (running at once: it has room) with the
    # conf, its run id pushed
    triggered = DagRun.objects.get(dag_id=TARGET)
    assert (triggered.run_id, triggered.state, triggered.conf) == (
        "manual__triggered_by_a_task",
        "running",
        {"from": "registry_routes"},
    )
    assert list(triggered.task_instances.values_list("task_id", "state")) == [("noop", "scheduled")]
    assert xcoms[("trigger", "trigger_run_id")] == "manual__triggered_by_a_task"

    # the reads of other runs and tasks, as the last task saw them
    asked = xcoms[("ask", "return_value")]
    assert asked == {
        "dr_count": 1,
        "dagrun_state": "running",
        "ti_count": 4,  # push, pull, templated, trigger (ask itself was running)
        "task_states": {
            run_id: {
                "push": "success",
                "pull": "success",
                "templated": "success",
                "trigger": "success",
                "ask": "running",
            }
        },
        "previous_run": "manual__earlier",
        "previous_ti": "manual__earlier",
        "dag": {"dag_id": TARGET, "tags": ["triggered"], "is_paused": False},
        "breadcrumbs": ["pull", "push", "templated", "trigger"],
    }
