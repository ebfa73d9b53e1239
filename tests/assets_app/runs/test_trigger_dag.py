"""Triggering a DAG: ``dag_run_trigger`` and ``manage.py trigger_dag``; and, end to end, a
triggered producer run by the worker (the operator API's route:
``tests/operatorapi/test_trigger.py``)."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from assets_app.exceptions import DagNotFoundError, DagRunExistsError, DagStaleError
from assets_app.models import AssetEvent, Dag, DagRun, DagTask, TaskInstance
from assets_app.services.runs.dag_runs import dag_run_trigger
from tests.live_server import REPO, server_env

pytestmark = pytest.mark.django_db

SEED = str(REPO / "examples" / "dags.yaml")
PRODUCER = "asset_s3_bucket_producer"


@pytest.fixture
def seed() -> None:
    call_command("declare_dags", SEED, stdout=StringIO())


def test_a_triggered_run_starts_with_a_scheduled_task_instance_per_task(seed):
    DagTask.objects.filter(dag_id=PRODUCER).update(retries=2)
    when = datetime(2026, 12, 1, 6, 30, tzinfo=UTC)

    run = dag_run_trigger(dag_id=PRODUCER, conf={"rows": 3}, logical_date=when)

    assert run.run_id == "manual__2026-12-01T06:30:00+00:00"
    assert (run.run_type, run.state, run.conf) == ("manual", "running", {"rows": 3})
    assert run.logical_date == run.data_interval_start == run.data_interval_end == when
    [ti] = TaskInstance.objects.filter(dag_run=run)
    assert (ti.task_id, ti.state, ti.max_tries) == ("produce_asset_events", "scheduled", 2)


def test_trigger_refusals_write_nothing(seed):
    dag_run_trigger(dag_id=PRODUCER, run_id="mine")
    with pytest.raises(DagRunExistsError, match="has a run 'mine' already"):
        dag_run_trigger(dag_id=PRODUCER, run_id="mine")
    with pytest.raises(DagNotFoundError, match="'nope' not found"):
        dag_run_trigger(dag_id="nope")
    Dag.objects.filter(dag_id=PRODUCER).update(is_stale=True)
    with pytest.raises(DagStaleError, match="is stale"):
        dag_run_trigger(dag_id=PRODUCER, run_id="other")
    assert list(DagRun.objects.values_list("run_id", flat=True)) == ["mine"]
    assert TaskInstance.objects.count() == 1


def test_the_command_prints_the_run_and_refuses_bad_options(seed):
    out = StringIO()
    call_command(
        "trigger_dag",
        PRODUCER,
        "--run-id",
        "by-hand",
        "--conf",
        '{"k": 1}',
        "--logical-date",
        "2026-12-01T00:00:00+01:00",
        stdout=out,
    )
    assert out.getvalue() == f"Triggered {PRODUCER} run by-hand (running, 1 task instance(s))\n"
    run = DagRun.objects.get(run_id="by-hand")
    assert run.conf == {"k": 1}
    assert run.logical_date == datetime(2026, 11, 30, 23, 0, tzinfo=UTC)
    for args, message in [
        (["--conf", "[1]"], "--conf must be a JSON object, got list"),
        (["--conf", "{"], "--conf is not valid JSON"),
        (["--logical-date", "yesterday"], "--logical-date is not an ISO 8601 date-time"),
        (["--logical-date", "2026-12-01T00:00:00"], "--logical-date needs a timezone"),
        (["--run-id", "by-hand"], "has a run 'by-hand' already"),
    ]:
        with pytest.raises(CommandError, match=message):
            call_command("trigger_dag", PRODUCER, *args, stdout=StringIO())
    with pytest.raises(CommandError, match="'nope' not found"):
        call_command("trigger_dag", "nope", stdout=StringIO())
    assert DagRun.objects.count() == 1


@pytest.mark.slow
def test_a_triggered_producer_runs_to_success_under_the_worker(server, transactional_db, tmp_path):
    call_command("declare_dags", SEED, stdout=StringIO())
    call_command("trigger_dag", PRODUCER, "--run-id", "manual__now", stdout=StringIO())

    worker = subprocess.run(
        [
            *(sys.executable, "manage.py", "worker", "--once", "--server", server.url),
            *("--log-dir", str(tmp_path / "logs")),
        ],
        cwd=REPO,
        env=server_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert worker.returncode == 0, worker.stdout + worker.stderr
    run = DagRun.objects.get(dag_id=PRODUCER, run_id="manual__now")
    assert run.state == "success", worker.stdout
    event = AssetEvent.objects.get(source_run_id="manual__now")
    assert event.asset.uri == "s3://bucket/my-task"
