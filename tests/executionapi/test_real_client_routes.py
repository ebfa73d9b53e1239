"""The real ``apache-airflow-task-sdk`` client against a live server: XCom ``slice`` and
``item``, ``dag-runs`` (trigger, trigger again, reset, get, state, count, previous),
``dags/{dag_id}``, task-instance ``count``, ``states``, ``previous``, ``breadcrumbs`` and
``health``. Each answer is parsed by the SDK's own models. Skipped when
``apache-airflow-task-sdk`` is not installed."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from assets_app.models import DagRun, TaskInstance, XCom
from assets_app.tokens import token_issue
from tests.executionapi.conftest import airflow_env
from tests.factories import DagFactory, DagRunFactory, TaskInstanceFactory

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SCRIPT = Path(__file__).with_name("real_client_routes_script.py")
JAN = [datetime(2026, 1, day, tzinfo=UTC) for day in range(1, 4)]


def test_real_client_reads_and_triggers_through_the_new_routes(
    airflow_sdk, server, make_ti, tmp_path
):
    # given a DAG with two finished runs, a mapped task's XComs, and a running caller
    caller = make_ti(dag_id="seq", task_id="ask")
    caller.dag_run.run_id = caller.run_id = "s1"
    caller.dag_run.save()
    caller.save()
    for map_index, value in enumerate(["m0", {"m": 1}, None, "m3"]):
        XCom.objects.create(
            dag_run=caller.dag_run,
            dag_id="seq",
            run_id="s1",
            task_id="mapped",
            map_index=map_index,
            key="return_value",
            value=value,
        )
    target = DagFactory(
        dag_id="target", task_ids=["a", "grp.b"], tags=["t2", "t1"], fileloc="/d/target.py"
    )
    for i, state in enumerate(["failed", "success"]):
        run = DagRunFactory(dag=target, run_id=f"r{i}", logical_date=JAN[i], state=state)
        for task_id in ("a", "grp.b"):
            TaskInstanceFactory(dag_run=run, task_id=task_id, state=state, duration=2.0)

    # when the real client calls the routes
    result = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            f"{server.url}/execution",
            token_issue(task_instance_id=caller.pk),
        ],
        env=airflow_env(tmp_path),
        capture_output=True,
        timeout=180,
        check=False,
    )

    # then every answer parsed in the SDK's models, with the registry's data
    assert result.returncode == 0, result.stderr.decode()[-3000:] + server.log()[-3000:]
    out = json.loads(result.stdout.decode().strip().splitlines()[-1])
    assert out["slice_all"] == ["m0", {"m": 1}, None, "m3"]
    assert out["slice_tail"] == [None, "m3"]
    assert out["slice_step"] == ["m3", {"m": 1}]
    assert out["item_last"] == "m3"
    assert out["item_missing"] == "XCOM_NOT_FOUND"

    assert out["trigger"] == {"ok": True, "type": "OKResponse"}
    assert out["trigger_again"] == "DAGRUN_ALREADY_EXISTS"
    assert out["trigger_reset"] == {"ok": True, "type": "OKResponse"}
    triggered = DagRun.objects.get(dag_id="target", run_id="manual__from_task")
    assert (triggered.conf, triggered.logical_date) == ({"a": 1}, datetime(2026, 1, 9, tzinfo=UTC))
    assert out["detail"]["run_id"] == "manual__from_task"
    assert out["detail"]["conf"] == {"a": 1}
    assert out["detail"]["state"] == "running"
    assert out["detail"]["logical_date"] == "2026-01-09T00:00:00Z"
    # the reset cleared r0: its failed task instances run again
    assert set(TaskInstance.objects.filter(run_id="r0").values_list("state", flat=True)) == {
        "scheduled"
    }
    assert out["state"] == "success"
    assert out["count_running"] == 2  # the triggered run and the cleared r0
    assert out["count_runs"] == 2
    assert out["previous_run"] == "r1"
    assert out["previous_none"] is None
    assert out["state_missing"] == [
        404,
        {
            "reason": "not_found",
            "message": "Dag run with dag_id 'target' and run_id 'nope' was not found",
        },
    ]
    assert out["dag"] == {
        "dag_id": "target",
        "is_paused": False,
        "bundle_name": None,
        "bundle_version": None,
        "relative_fileloc": "target.py",
        "owners": None,
        "tags": ["t1", "t2"],
        "next_dagrun": None,
    }

    assert out["ti_count"] == 1
    assert out["ti_count_group"] == 3  # grp.b in r0, r1 and the triggered run
    assert out["ti_states"] == {"r1": {"a": "success", "grp.b": "success"}}
    assert out["previous_ti"]["run_id"] == "r1"
    assert out["previous_ti"]["duration"] == 2.0
    assert [crumb["task_id"] for crumb in out["breadcrumbs"]] == ["a", "grp.b"]
    assert out["health"] == [200, {"status": "healthy"}]
    assert out["version_header"] == "2026-06-30"
