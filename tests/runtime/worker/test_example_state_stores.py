"""Airflow's own state store examples (``example_task_state_store.py`` and
``example_asset_state_store.py``, shipped in ``apache-airflow-core``), loaded from their files
by ``manage.py declare_dags --dags-folder`` with no manifest, run end to end by a real
``manage.py worker`` with Airflow's task SDK:

- ``example_task_state_store``: the first try submits a job, stores its id
  (``retention=NEVER_EXPIRE``) and fails; the retry (a new try, with a new task instance id)
  reads the id back from ``context["task_state_store"]``, reattaches and succeeds.
- ``example_asset_state_store_producer`` advances a watermark in the asset's store; its
  event triggers ``example_asset_state_store_consumer``, which reads the store.

Skipped without ``apache-airflow-core``/``apache-airflow-task-sdk``."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from assets_app.models import AssetStateStore, Dag, DagRun, TaskInstance, TaskStateStore
from assets_app.services.dags.declare import dags_set_paused
from assets_app.services.runs.dag_runs import dag_run_trigger
from assets_app.services.scheduling.scheduler import scheduler_pass
from assets_app.services.scheduling.upkeep import upkeep_pass
from tests.executionapi.conftest import airflow_sdk  # noqa: F401 (a fixture)
from tests.runtime.worker.conftest import dags_folder_load, wait_until

pytestmark = pytest.mark.slow

if importlib.util.find_spec("airflow.example_dags") is None:  # pragma: no cover
    pytest.skip("apache-airflow-core is not installed", allow_module_level=True)

import airflow  # noqa: E402 - only after the skip

EXAMPLES = Path(airflow.__file__).parent / "example_dags"
FILES = ("example_task_state_store.py", "example_asset_state_store.py")
TASK_DAG = "example_task_state_store"
PRODUCER = "example_asset_state_store_producer"
CONSUMER = "example_asset_state_store_consumer"
DAG_IDS = {TASK_DAG, PRODUCER, CONSUMER}
FINISHED = ("success", "failed")


def task_log(tmp_path: Path, ti: TaskInstance, try_number: int) -> str:
    """The task's log of one try, under the worker's ``--log-dir``."""
    log_dir = tmp_path / "task_logs" / ti.dag_id
    (path,) = log_dir.glob(f"*/{ti.task_id}/attempt={try_number}.log")
    return path.read_text(errors="replace")


def test_airflows_state_store_examples_run_from_their_files(
    airflow_sdk,  # noqa: F811
    start_worker,
    settings,
    tmp_path,
):
    # given Airflow's two example files, unchanged, in a DAGs folder, loaded by the loader
    dags_folder = tmp_path / "dags"
    dags_folder.mkdir()
    for name in FILES:
        shutil.copy(EXAMPLES / name, dags_folder / name)
    out = dags_folder_load(dags_folder, settings=settings, parser_home=tmp_path / "parser_home")
    assert set(Dag.objects.values_list("dag_id", flat=True)) == DAG_IDS, out
    assert dags_set_paused(dag_ids=DAG_IDS, is_paused=False) == 3

    # when both are triggered and a real worker runs what becomes runnable (the scheduler's
    # upkeep schedules the retry once its 5 s delay has passed)
    worker = start_worker(env={"AIRFLOW_HOME": str(tmp_path / "airflow_home")})
    started = timezone.now()
    task_run = dag_run_trigger(dag_id=TASK_DAG, run_id="manual__task_store")
    producer_run = dag_run_trigger(dag_id=PRODUCER, run_id="manual__asset_store")

    def all_done() -> bool:
        upkeep_pass()
        scheduler_pass()  # the producer's event makes the consumer's run
        runs = list(DagRun.objects.all())
        return {r.dag_id for r in runs} == DAG_IDS and all(r.state in FINISHED for r in runs)

    try:
        wait_until(all_done, timeout=400, what=f"the example runs\n{worker.output()}")
    finally:
        worker.process.terminate()
        worker.wait(timeout=60)

    # then every run succeeded
    runs = {r.dag_id: r for r in DagRun.objects.all()}
    assert {d: r.state for d, r in runs.items()} == dict.fromkeys(DAG_IDS, "success"), (
        worker.output()
    )

    # the task's second try found the job its first try submitted, in the task's store
    run_job = TaskInstance.objects.get(dag_run=task_run, task_id="run_job")
    assert (run_job.state, run_job.try_number) == ("success", 2)
    stored = {
        row.key: row for row in TaskStateStore.objects.filter(dag_run=task_run, task_id="run_job")
    }
    assert set(stored) == {"job_id", "submitted_at", "status", "result"}
    job_id = json.loads(stored["job_id"].value)
    assert re.fullmatch(r"job-[a-z0-9]{8}", job_id)
    assert json.loads(stored["status"].value) == "complete"
    result = json.loads(stored["result"].value)
    assert result["job_id"] == job_id
    assert result["status"] == "succeeded"
    # NEVER_EXPIRE → no expiry; no retention → Airflow's default of 30 days
    assert stored["job_id"].expires_at is None
    expiry = stored["submitted_at"].expires_at
    assert expiry is not None
    assert started + timedelta(days=29) < expiry < timezone.now() + timedelta(days=31)
    assert f"Try 1: submitted job: {job_id}" in task_log(tmp_path, run_job, 1)
    assert f"Try 2: reattaching to existing job: {job_id}" in task_log(tmp_path, run_job, 2)

    # the producer advanced the asset's watermark; the consumer read what it stored
    rows = {row.key: row for row in AssetStateStore.objects.select_related("asset")}
    assert set(rows) == {"watermark", "total_runs", "last_run_summary"}
    assert {row.asset.name for row in rows.values()} == {"orders/daily"}
    assert json.loads(rows["total_runs"].value) == 1
    summary = json.loads(rows["last_run_summary"].value)
    assert summary["prev_watermark"] == "2026-01-01T00:00:00+00:00"
    assert summary["completed_at"] == json.loads(rows["watermark"].value)
    assert {
        (r.last_updated_by_dag_id, r.last_updated_by_run_id, r.last_updated_by_task_id)
        for r in rows.values()
    } == {(PRODUCER, producer_run.run_id, "load")}
    consume = TaskInstance.objects.get(dag_run=runs[CONSUMER], task_id="consume")
    expected = (
        f"Processing {summary['rows_loaded']} rows up to watermark {summary['completed_at']}. "
        "Total runs so far: 1."
    )
    assert expected in task_log(tmp_path, consume, 1)
