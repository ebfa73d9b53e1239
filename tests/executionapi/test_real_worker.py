"""A real Airflow 3 worker runs a real DAG file's tasks against a live registry.

The installed ``apache-airflow-task-sdk`` supervisor (``supervise_task``, what every Airflow
executor calls) loads ``airflow_dags/registry_worker_dag.py`` from a DAG bundle, runs each task
in its own child process and talks to the registry's execution API over HTTP: ``/run``,
heartbeats, ``/rtif``, ``validate-inlets-and-outlets``, asset-event reads, XCom pushes and the
final ``/state`` with the task's outlets and outlet events. No Airflow metadata database is
involved: the worker only knows the task instance, its token and the server URL.

The workers run in subprocesses so that Airflow's configuration and logging stay out of the
test process. Skipped when ``apache-airflow-task-sdk`` is not installed.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from django.core.management import call_command

from assets_app.models import (
    Asset,
    AssetActive,
    AssetAlias,
    AssetAliasAsset,
    AssetAliasAssetEvent,
    AssetDagRunQueue,
    AssetEvent,
    TaskInstance,
    XCom,
)
from assets_app.services.runs.dag_runs import task_instance_create, task_instance_token_issue
from runtime.launch import airflow_workload
from tests.executionapi.conftest import airflow_env

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

HERE = Path(__file__).parent
DAGS_DIR = HERE / "airflow_dags"
DAG_FILE = "registry_worker_dag.py"
WORKER_SCRIPT = HERE / "real_worker_script.py"
WORKER_TIMEOUT = 240  # seconds for one worker subprocess (Airflow imports alone take seconds)

DAG_ID = "registry_worker_producer"
PRODUCED = {"name": "worker_asset", "uri": "s3://registry-tests/worker/produced"}
DYNAMIC = {"name": "worker_dynamic", "uri": "s3://registry-tests/worker/dynamic"}
ALIAS = "worker_alias"

# The DAG file's DAG as the registry must know it, and consumers of every kind
# (docs/concepts.md, "What one success writes", step 6).
MANIFEST = {
    "dags": [
        {
            "dag_id": DAG_ID,
            "tasks": [
                {"task_id": "produce", "outlets": [{"asset": PRODUCED}]},
                {"task_id": "produce_through_alias", "outlets": [{"alias": ALIAS}]},
                {"task_id": "read_inlet_events", "inlets": [{"asset": PRODUCED}]},
            ],
        },
        {
            "dag_id": "on_worker_asset",
            "schedule": {"asset": PRODUCED},
            "tasks": [{"task_id": "consume"}],
        },
        {
            "dag_id": "on_worker_alias",
            "schedule": {"alias": ALIAS},
            "tasks": [{"task_id": "consume"}],
        },
        {
            "dag_id": "on_worker_dynamic_by_uri",
            "schedule": {"asset_ref": {"uri": DYNAMIC["uri"]}},
            "tasks": [{"task_id": "consume"}],
        },
        {
            "dag_id": "paused_on_worker_asset",
            "is_paused": True,
            "schedule": {"asset": PRODUCED},
            "tasks": [{"task_id": "consume"}],
        },
    ]
}


def declare(tmp_path: Path) -> None:
    manifest = tmp_path / "worker_dags.yaml"
    manifest.write_text(yaml.safe_dump(MANIFEST, sort_keys=False))
    call_command("declare_dags", str(manifest), stdout=io.StringIO())


def queued_task_instance(task_id: str, run_id: str) -> dict[str, object]:
    ti = task_instance_create(dag_id=DAG_ID, task_id=task_id, run_id=run_id).task_instance
    return {
        "id": str(ti.pk),
        "token": task_instance_token_issue(task_instance_id=ti.pk),
        "dag_id": ti.dag_id,
        "task_id": ti.task_id,
        "run_id": ti.run_id,
        "try_number": ti.try_number,
        "map_index": ti.map_index,
    }


def failure_report(result: subprocess.CompletedProcess, server, log_dir: Path | None) -> str:
    logs = ""
    if log_dir is not None and log_dir.exists():
        logs = "\n".join(f"--- {p.name}\n{p.read_text()[-2000:]}" for p in log_dir.iterdir())
    return (
        f"exit {result.returncode}\n--- stdout\n{result.stdout[-3000:]}\n"
        f"--- stderr\n{result.stderr[-3000:]}\n{logs}\n--- server\n{server.log()[-3000:]}"
    )


def supervise(
    server,
    tmp_path: Path,
    *,
    dag_file: str,
    tis: list[dict[str, object]],
    timeout: float = WORKER_TIMEOUT,
) -> tuple[subprocess.CompletedProcess, Path]:
    """Run ``tis`` of ``airflow_dags/<dag_file>`` one after the other with the real
    supervisor (``real_worker_script.py``, a DAG bundle on ``DAGS_DIR``); its result and the
    task logs' folder."""
    log_dir = tmp_path / "task_logs"
    spec = tmp_path / "worker_spec.json"
    spec.write_text(
        json.dumps(
            {
                "server": f"{server.url}/execution/",
                "bundle": "registry-tests",
                "dag_rel_path": dag_file,
                "log_dir": str(log_dir),
                "task_instances": tis,
            }
        )
    )
    bundles = [
        {
            "name": "registry-tests",
            "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
            "kwargs": {"path": str(DAGS_DIR), "refresh_interval": 0},
        }
    ]
    result = subprocess.run(
        [sys.executable, str(WORKER_SCRIPT), str(spec)],
        env=airflow_env(
            tmp_path, AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST=json.dumps(bundles)
        ),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return result, log_dir


def test_real_worker_runs_dag_file_tasks_and_registers_their_asset_events(
    airflow_sdk, server, tmp_path
):
    # given the DAG file's DAG and its consumers declared, and one queued instance per task
    declare(tmp_path)
    run_id = "manual__real-worker"
    tis = [
        queued_task_instance(task_id, run_id)
        for task_id in ("produce", "produce_through_alias", "read_inlet_events")
    ]
    # when the real supervisor runs the three tasks one after the other
    started = time.monotonic()
    result, log_dir = supervise(server, tmp_path, dag_file=DAG_FILE, tis=tis)
    elapsed = time.monotonic() - started

    # then every task exited 0 and is a success in the registry
    report = failure_report(result, server, log_dir)
    assert result.returncode == 0, report
    exit_codes = json.loads(result.stdout.strip().splitlines()[-1])
    assert exit_codes == [
        {"task_id": "produce", "exit_code": 0},
        {"task_id": "produce_through_alias", "exit_code": 0},
        {"task_id": "read_inlet_events", "exit_code": 0},
    ], report
    by_task = {ti.task_id: ti for ti in TaskInstance.objects.filter(dag_id=DAG_ID)}
    for ti in by_task.values():
        assert ti.state == "success", (ti.task_id, ti.state, report)
        assert ti.end_date is not None
        assert ti.duration is not None
        assert ti.duration >= 0
        assert ti.pid
        assert ti.hostname
        assert ti.rendered_fields == {"templates_dict": None, "op_args": [], "op_kwargs": {}}
    # the 1.5 s task was heartbeated while it ran
    assert by_task["produce"].last_heartbeat_at is not None

    # the plain outlet: one event with the extra the task set, on the declared asset
    produced = Asset.objects.get(**PRODUCED)
    event = AssetEvent.objects.get(asset=produced)
    assert event.extra == {"rows": 3, "source": "real-worker"}
    assert (event.source_dag_id, event.source_task_id, event.source_run_id) == (
        DAG_ID,
        "produce",
        run_id,
    )
    assert event.source_map_index == -1
    assert event.partition_key is None
    assert not event.source_aliases.exists()

    # the alias outlet: the target asset created (inactive, extra from the Asset definition),
    # the alias linked to it once, one event linked to the alias
    dynamic = Asset.objects.get(**DYNAMIC)
    assert dynamic.extra == {"kind": "dynamic"}
    assert not AssetActive.objects.filter(asset=dynamic).exists()
    alias = AssetAlias.objects.get(name=ALIAS)
    assert list(AssetAliasAsset.objects.values_list("alias_id", "asset_id")) == [
        (alias.pk, dynamic.pk)
    ]
    alias_event = AssetEvent.objects.get(asset=dynamic)
    assert alias_event.extra == {"via": "alias"}
    assert alias_event.source_task_id == "produce_through_alias"
    assert alias_event.source_run_id == run_id
    assert list(AssetAliasAssetEvent.objects.values_list("alias_id", "event_id")) == [
        (alias.pk, alias_event.pk)
    ]
    assert AssetEvent.objects.count() == 2  # the inlet-reading task wrote nothing

    # the consumers are queued: directly, through the alias, through a uri reference; the
    # paused one is not
    assert set(AssetDagRunQueue.objects.values_list("asset__name", "target_dag_id")) == {
        ("worker_asset", "on_worker_asset"),
        ("worker_dynamic", "on_worker_alias"),
        ("worker_dynamic", "on_worker_dynamic_by_uri"),
    }

    # return values went through the XCom routes; the third task read the first one's event
    # back through GET /asset-events/by-asset
    xcoms = dict(XCom.objects.filter(key="return_value").values_list("task_id", "value"))
    assert xcoms == {
        "produce": {"rows": 3},
        "read_inlet_events": [{"rows": 3, "source": "real-worker"}],
    }
    assert elapsed < WORKER_TIMEOUT


def test_airflow_execute_workload_command_runs_a_task_without_a_metadata_db(
    airflow_sdk, server, tmp_path
):
    # given a task instance made the way an operator makes one (docs/airflow-worker.md)
    declare(tmp_path)
    out = io.StringIO()
    call_command(
        "create_task_instance",
        "--dag-id",
        DAG_ID,
        "--task-id",
        "produce",
        "--run-id",
        "manual__execute-workload",
        stdout=out,
    )
    created = json.loads(out.getvalue())
    # the workload Airflow's executors hand over, as the worker builds it (docs/airflow-worker.md)
    workload = airflow_workload(
        ti=TaskInstance.objects.get(pk=created["id"]),
        token=created["token"],
        dag_rel_path=DAG_FILE,
    )

    # when Airflow's own entry point for containerised executors runs it, with the default
    # dags-folder bundle and the server from [core] execution_api_server_url
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "airflow.sdk.execution_time.execute_workload",
            "--json-string",
            json.dumps(workload),
        ],
        env=airflow_env(
            tmp_path,
            AIRFLOW__CORE__DAGS_FOLDER=str(DAGS_DIR),
            AIRFLOW__CORE__EXECUTION_API_SERVER_URL=f"{server.url}/execution/",
        ),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=WORKER_TIMEOUT,
        check=False,
    )

    # then (the command exits 0 whatever the task did) the registry has the success
    report = failure_report(result, server, None)
    assert result.returncode == 0, report
    assert '"final_state":"success"' in result.stdout, report
    ti = TaskInstance.objects.get(pk=created["id"])
    assert ti.state == "success", report
    event = AssetEvent.objects.get()
    assert event.asset.name == PRODUCED["name"]
    assert event.extra == {"rows": 3, "source": "real-worker"}
    assert event.source_run_id == "manual__execute-workload"
    assert set(AssetDagRunQueue.objects.values_list("asset__name", "target_dag_id")) == {
        ("worker_asset", "on_worker_asset")
    }
