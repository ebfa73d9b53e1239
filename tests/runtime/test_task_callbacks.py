"""A task's ``on_retry_callback`` / ``on_failure_callback`` for tries that ended outside their
process, run by ``manage.py dag_processor`` in the real DAG file's code with the task
instance's Airflow context (as Airflow's DAG processor runs a ``TaskCallbackRequest``): the
loader records which callbacks a task has, the reaper asks, the processor runs each once."""

from __future__ import annotations

import importlib.util
import json
import textwrap
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from assets_app.models import DagCallbackRequest, DagTask, TaskInstance
from assets_app.services.dags.declare import dags_set_paused
from assets_app.services.runs.dag_runs import dag_run_trigger
from assets_app.services.scheduling.upkeep import upkeep_pass
from tests.runtime.worker.conftest import dags_folder_load

pytestmark = [pytest.mark.slow, pytest.mark.django_db]

if importlib.util.find_spec("airflow.dag_processing") is None:  # pragma: no cover
    pytest.skip("apache-airflow-core is not installed", allow_module_level=True)

DAG_FILE = """
import json
from datetime import datetime, timedelta
from pathlib import Path

from airflow.sdk import DAG, task

OUT = Path({out!r})


def record(kind):
    def callback(context):
        ti = context["ti"]
        OUT.joinpath(f"{{ti.task_id}}.{{kind}}.{{ti.try_number}}").write_text(json.dumps({{
            "dag_id": ti.dag_id,
            "run_id": context["run_id"],
            "map_index": ti.map_index,
            "max_tries": ti.max_tries,
            "conf": context["dag_run"].conf,
            "params": dict(context["params"]),
        }}))
    return callback


def broken(context):
    raise RuntimeError("the retry callback broke")


with DAG(
    "nightly_warehouse_load",
    schedule="@daily",
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=["warehouse", "nightly"],
    params={{"region": "eu-west-1"}},
):
    @task(
        retries=1,
        retry_delay=timedelta(seconds=1),
        on_retry_callback=[broken, record("retry")],
        on_failure_callback=record("failure"),
        on_success_callback=record("success"),
    )
    def load_orders_from_the_payments_service_into_the_warehouse():
        return 1

    @task
    def notify(n):
        return n

    notify(load_orders_from_the_payments_service_into_the_warehouse())
"""
LOAD = "load_orders_from_the_payments_service_into_the_warehouse"


def _reap(run, try_number: int) -> None:
    long_ago = timezone.now() - timedelta(hours=1)
    TaskInstance.objects.filter(dag_run=run, task_id=LOAD).update(
        state="running", try_number=try_number, start_date=long_ago, last_heartbeat_at=long_ago
    )
    upkeep_pass()


def test_a_reaped_tasks_retry_and_failure_callbacks_run_in_the_dag_processor(settings, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    folder = tmp_path / "dags"
    folder.mkdir()
    (folder / "warehouse.py").write_text(textwrap.dedent(DAG_FILE.format(out=str(out))))
    loaded = dags_folder_load(folder, settings=settings, parser_home=tmp_path / "parser_home")
    # the loader records the callbacks the DAG processor may run (failure and retry only)
    flags = DagTask.objects.values_list(
        "task_id", "has_on_failure_callback", "has_on_retry_callback"
    )
    assert sorted(flags) == [(LOAD, True, True), ("notify", False, False)], loaded
    dags_set_paused(dag_ids=["nightly_warehouse_load"], is_paused=False)
    run = dag_run_trigger(
        dag_id="nightly_warehouse_load", run_id="manual__2026-12-05", conf={"region": "us-east-2"}
    )

    # its first try and then its second stop heartbeating: both are reaped
    _reap(run, 1)
    _reap(run, 2)
    assert TaskInstance.objects.get(dag_run=run, task_id=LOAD).state == "failed"

    out_text = StringIO()
    call_command("dag_processor", str(folder), "--once", stdout=out_text)

    # the retry callbacks ran for try 1 (the broken one recorded, the next still ran), the
    # failure callback for try 2, with the task instance's context; never the success one
    assert sorted(p.name for p in out.iterdir()) == [f"{LOAD}.failure.2", f"{LOAD}.retry.1"]
    seen = json.loads((out / f"{LOAD}.failure.2").read_text())
    assert seen == {
        "dag_id": "nightly_warehouse_load",
        "run_id": "manual__2026-12-05",
        "map_index": -1,
        "max_tries": 1,
        "conf": {"region": "us-east-2"},
        "params": {"region": "us-east-2"},
    }
    done = {r.kind: r for r in DagCallbackRequest.objects.filter(dag_run=run)}
    assert (done["failure"].state, done["failure"].error) == ("success", "")
    assert done["retry"].state == "failed"
    assert "RuntimeError: the retry callback broke" in done["retry"].error
    log = out_text.getvalue()
    assert f"callback on_failure_callback of nightly_warehouse_load.{LOAD} / " in log
    # run once: a second pass has nothing to run
    again = StringIO()
    call_command("dag_processor", str(folder), "--once", stdout=again)
    assert "callback" not in again.getvalue()
