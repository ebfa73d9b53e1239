"""The run lifecycle with the real ``task_sdk`` CLI against a live server.

- A task declared with ``retries: 1`` fails its first try (the runner reports
  ``up_for_retry``), the upkeep schedules the next try, which succeeds: the run succeeds.
- A supervisor killed with -9 mid-task: the scheduler's upkeep reaps its task instance once
  the heartbeat timeout has passed, retrying it while tries remain; the dead runner's late
  report is refused (404 for a try that moved on, as Airflow; 409 for a failed one).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
import yaml
from django.utils import timezone

from assets_app.models import DagRun, TaskInstance, TaskInstanceHistory
from assets_app.services.dags.declare import dags_declare
from assets_app.services.dags.manifest import manifest_parse
from assets_app.services.runs.claims import task_instances_claim
from assets_app.services.runs.dag_runs import task_instance_create
from assets_app.services.scheduling.upkeep import task_instances_schedule_due, upkeep_pass
from assets_app.tokens import token_issue
from tests.live_server import REPO

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

TASKS = Path(__file__).resolve().parent / "lifecycle_tasks.py"


def _run_cli(server_url: str, ti: TaskInstance, task: str, **env: str) -> int:
    return subprocess.run(  # the CLI as a worker would run it
        [sys.executable, "-m", "task_sdk", "run", f"{TASKS}:{task}"],
        env={
            **os.environ,
            "PYTHONPATH": str(REPO),
            "TASK_SDK_SERVER": server_url,
            "TASK_SDK_TI_ID": str(ti.pk),
            "TASK_SDK_TOKEN": token_issue(task_instance_id=ti.pk),
            "TASK_SDK_HEARTBEAT_INTERVAL": "0.2",
            **env,
        },
        capture_output=True,
        timeout=120,
        check=False,
    ).returncode


def test_retries_1_first_try_fails_second_succeeds(server, tmp_path):
    manifest = """
    dags:
      - dag_id: flaky
        tasks: [{task_id: fails_once, retries: 1, retry_delay: 3600}]
    """
    dags_declare(manifest=manifest_parse(yaml.safe_load(manifest)), fileloc="flaky.yaml")
    first = task_instance_create(
        dag_id="flaky", task_id="fails_once", run_id="manual__flaky", max_tries=1
    ).task_instance
    marker = str(tmp_path / "marker")

    # try 1: run by the CLI, fails → up_for_retry (a new try, not yet due)
    assert _run_cli(server.url, first, "fails_once", LIFECYCLE_MARKER=marker) == 1
    second = TaskInstance.objects.get(dag_id="flaky")
    assert (second.state, second.try_number, second.max_tries) == ("up_for_retry", 1, 1)
    assert second.pk != first.pk
    assert task_instances_schedule_due() == (0, 0)  # its retry_delay is an hour

    # an hour later: try 2 is scheduled, claimed, run by the CLI and succeeds
    assert task_instances_schedule_due(now=timezone.now() + timedelta(hours=1)) == (1, 0)
    [claimed] = task_instances_claim(limit=5)
    assert (claimed.pk, claimed.try_number) == (second.pk, 2)
    assert _run_cli(server.url, claimed, "fails_once", LIFECYCLE_MARKER=marker) == 0

    # then
    final = TaskInstance.objects.get(dag_id="flaky")
    assert (final.pk, final.state, final.try_number) == (second.pk, "success", 2)
    [history] = TaskInstanceHistory.objects.all()
    assert (history.task_instance_id, history.try_number, history.state) == (
        first.pk,
        1,
        "failed",
    )
    run = DagRun.objects.get(dag_id="flaky")
    assert run.state == "success"
    assert run.end_date is not None


def _wait_for(condition, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.1)


@pytest.mark.parametrize(
    ("max_tries", "reaped_state", "late_status"),
    [
        pytest.param(1, "up_for_retry", 404, id="tries-left-retried"),
        pytest.param(0, "failed", 409, id="no-tries-failed"),
    ],
)
def test_killed_supervisor_is_reaped_and_its_late_report_refused(
    server, settings, max_tries, reaped_state, late_status
):
    ti = task_instance_create(
        dag_id="reaped", task_id="sleeps", run_id="manual__kill", max_tries=max_tries
    ).task_instance
    token = token_issue(task_instance_id=ti.pk)
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "TASK_SDK_SERVER": server.url,
        "TASK_SDK_TI_ID": str(ti.pk),
        "TASK_SDK_TOKEN": token,
        "TASK_SDK_HEARTBEAT_INTERVAL": "0.2",
    }
    runner = subprocess.Popen(
        [sys.executable, "-m", "task_sdk", "run", f"{TASKS}:sleeps"],
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        # given the task running and heartbeating
        _wait_for(
            lambda: TaskInstance.objects.filter(
                pk=ti.pk, state="running", last_heartbeat_at__isnull=False
            ).exists()
        )
        # when the supervisor and its task are killed with -9
        os.killpg(runner.pid, signal.SIGKILL)
        runner.wait(30)
    finally:
        if runner.poll() is None:
            os.killpg(runner.pid, signal.SIGKILL)
            runner.wait(30)

    # then nothing happens before the timeout …
    settings.TASK_INSTANCE_HEARTBEAT_TIMEOUT = 2
    assert upkeep_pass().reaped == []
    assert TaskInstance.objects.get(dag_id="reaped").state == "running"
    # … and once it has passed, the task instance is reaped
    time.sleep(2.5)
    [reaped] = upkeep_pass().reaped
    current = TaskInstance.objects.get(dag_id="reaped")
    assert (reaped.state, current.state, current.try_number) == (reaped_state, reaped_state, 1)
    assert current.failure_reason.startswith("heartbeat timeout: no heartbeat for more than 2 s")
    assert DagRun.objects.get(pk=ti.dag_run_id).state == ("running" if max_tries else "failed")
    if max_tries:
        assert current.pk != ti.pk
        assert TaskInstanceHistory.objects.get(task_instance_id=ti.pk).state == "failed"

    # the dead runner's late report (its token names the try it ran) is refused
    late = httpx.patch(
        f"{server.url}/execution/task-instances/{ti.pk}/state",
        json={"state": "success", "end_date": "2026-11-30T12:00:00Z"},
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    assert late.status_code == late_status, late.text
    assert TaskInstance.objects.get(dag_id="reaped").state == reaped_state
