"""Run semantics of real Airflow DAG files under a real ``manage.py worker``, as under Airflow
3.3: ``depends_on_past`` over two runs (the second waits without a state until the first,
cleared, succeeds), retries spaced by ``retry_exponential_backoff`` with Airflow's own
delays, and DAG-level ``on_success_callback`` / ``on_failure_callback`` run once per outcome
by ``manage.py dag_processor`` in the DAG file's code (their side effect observed; a
callback that raises is recorded, its run unchanged). The test plays the scheduler
(``task_instances_advance`` and ``upkeep_pass``, as each pass does)."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import textwrap
import time
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from assets_app.models import (
    Dag,
    DagCallbackRequest,
    DagRun,
    DagTask,
    TaskInstance,
    TaskInstanceHistory,
)
from assets_app.services.dags.declare import dags_set_paused
from assets_app.services.runs.advance import task_instances_advance
from assets_app.services.runs.clearing import task_instances_clear, task_instances_select
from assets_app.services.runs.dag_runs import dag_run_trigger
from assets_app.services.runs.past import task_instance_past_wait
from assets_app.services.runs.settle import dag_runs_fail_timed_out
from assets_app.services.runs.tries import RetryPolicy, retry_delay_seconds
from assets_app.services.scheduling.upkeep import upkeep_pass
from tests.executionapi.conftest import airflow_sdk  # noqa: F401 (a fixture)
from tests.live_server import REPO, server_env
from tests.runtime.worker.conftest import dags_folder_load, wait_until

pytestmark = pytest.mark.slow

if importlib.util.find_spec("airflow.dag_processing") is None:  # pragma: no cover
    pytest.skip("apache-airflow-core is not installed", allow_module_level=True)

DAGS = """
from datetime import datetime, timedelta
from pathlib import Path

from airflow.sdk import DAG, task

OUT = Path({out!r})


def record(name):
    def callback(context):
        run = context["dag_run"]
        OUT.joinpath(f"{{run.dag_id}}.{{name}}").write_text(f"{{run.run_id}} {{context['reason']}}")
    return callback


def broken(context):
    raise RuntimeError("the callback broke")


START = datetime(2026, 1, 1)

with DAG("cb_ok", schedule=None, start_date=START,
         on_success_callback=record("success"), on_failure_callback=record("failure")):
    @task
    def fine():
        return 1
    fine()

with DAG("cb_fail", schedule=None, start_date=START,
         on_failure_callback=[broken, record("failure")]):
    @task
    def bad():
        raise ValueError("asked to fail")
    bad()

with DAG("cb_broken", schedule=None, start_date=START, on_success_callback=broken):
    @task
    def fine_too():
        return 1
    fine_too()

with DAG("past", schedule=None, start_date=START, max_active_runs=2):
    @task(depends_on_past=True)
    def step():
        if not OUT.joinpath("let_pass").exists():
            raise ValueError("not yet")
    step()

with DAG("skipper", schedule=None, start_date=START):
    def skipped(context):
        OUT.joinpath("skipped").write_text(context["ti"].task_id)

    @task(on_skipped_callback=skipped)
    def skip_me():
        from airflow.exceptions import AirflowSkipException
        raise AirflowSkipException("not today")
    skip_me()

with DAG("too_slow", schedule=None, start_date=START, dagrun_timeout=timedelta(hours=1)):
    @task
    def sleepy():
        import time
        OUT.joinpath("sleepy.started").write_text("")
        time.sleep(600)
        OUT.joinpath("sleepy.finished").write_text("")
    sleepy()

with DAG("backoff", schedule=None, start_date=START):
    @task(retries=3, retry_delay=timedelta(seconds=1), retry_exponential_backoff=2.0,
          max_retry_delay=timedelta(seconds=3))
    def flaky():
        raise ValueError("always")
    flaky()
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _state(dag_id: str, run_id: str) -> str:
    return DagRun.objects.get(dag_id=dag_id, run_id=run_id).state


def _ended(*keys: tuple[str, str]) -> bool:
    task_instances_advance()  # the scheduler's pass
    upkeep_pass()
    return all(_state(*key) in ("success", "failed") for key in keys)


def test_past_backoff_and_dag_callbacks_of_real_dag_files(
    airflow_sdk,  # noqa: F811
    start_worker,
    settings,
    tmp_path,
):
    out = tmp_path / "out"
    out.mkdir()
    folder = tmp_path / "dags"
    folder.mkdir()
    (folder / "semantics.py").write_text(textwrap.dedent(DAGS.format(out=str(out))))
    loaded = dags_folder_load(folder, settings=settings, parser_home=tmp_path / "parser_home")
    dags = Dag.objects.in_bulk(
        ["cb_ok", "cb_fail", "cb_broken", "past", "backoff", "skipper", "too_slow"]
    )
    assert len(dags) == 7, loaded
    assert dags["too_slow"].dagrun_timeout == 3600
    assert (dags["cb_ok"].has_on_success_callback, dags["cb_ok"].has_on_failure_callback) == (
        True,
        True,
    )
    assert (dags["cb_fail"].has_on_success_callback, dags["past"].has_on_failure_callback) == (
        False,
        False,
    )
    flaky = DagTask.objects.get(dag_id="backoff")
    assert (flaky.retry_exponential_backoff, flaky.max_retry_delay) == (2.0, 3.0)
    assert DagTask.objects.get(dag_id="past").depends_on_past
    dags_set_paused(dag_ids=list(dags), is_paused=False)

    # a DAG processor that loads the folder now and then only every 10 minutes: the
    # callbacks below are run between its loads, as soon as the runs ask
    processor_out = tmp_path / "processor.out"
    with processor_out.open("w") as log:
        processor = subprocess.Popen(
            [sys.executable, "manage.py", "dag_processor", str(folder), "--interval", "600"],
            cwd=REPO,
            env=server_env(DAG_PARSER_HOME=str(tmp_path / "parser_home")),
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
        )
    worker = start_worker(
        "--concurrency",
        "2",
        env={
            "AIRFLOW_HOME": str(tmp_path / "airflow_home"),
            "AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": "1",
        },
    )
    try:
        # dagrun_timeout: once its task runs, the run is an hour older (the upkeep's clock)
        slow = dag_run_trigger(dag_id="too_slow", run_id="r1")
        wait_until(
            lambda: (out / "sleepy.started").exists(),
            timeout=300,
            what=f"the slow task to start\n{worker.output()[-20000:]}",
        )
        assert dag_runs_fail_timed_out(now=timezone.now() + timedelta(hours=1, seconds=1)) == [
            slow.pk
        ]
        # the worker still runs, and the timed-out task's process is gone (its runner's
        # heartbeat was refused) long before the task's 600 s
        sleepy = TaskInstance.objects.get(dag_id="too_slow")
        assert sleepy.state == "skipped"
        assert sleepy.pid
        wait_until(lambda: not _alive(sleepy.pid), timeout=60, what="the timed-out task to stop")
        assert worker.process.poll() is None

        for dag_id in ("cb_ok", "cb_fail", "cb_broken", "backoff", "skipper"):
            dag_run_trigger(dag_id=dag_id, run_id="r1")
        first = dag_run_trigger(dag_id="past", run_id="first")
        time.sleep(0.01)
        second = dag_run_trigger(dag_id="past", run_id="second")
        keys = [
            (d, "r1") for d in ("cb_ok", "cb_fail", "cb_broken", "backoff", "skipper", "too_slow")
        ]
        wait_until(
            lambda: _ended(*keys, ("past", "first")),
            timeout=600,
            what=f"the runs\n{worker.output()[-20000:]}",
        )

        # depends_on_past: the first run failed, the second's task waits without a state
        assert _state("past", "first") == "failed"
        for _ in range(3):
            task_instances_advance()
            time.sleep(0.5)
        waiting = TaskInstance.objects.get(dag_run=second)
        assert waiting.state is None
        assert "(failed in run first)" in task_instance_past_wait(waiting)

        # a clear of the past that now succeeds releases it
        (out / "let_pass").write_text("")
        task_instances_clear(
            task_instances=task_instances_select(dag_id="past", run_id=first.run_id)
        )
        wait_until(
            lambda: _ended(("past", "first"), ("past", "second")),
            timeout=300,
            what=f"the past runs\n{worker.output()[-20000:]}",
        )
        # DAG callbacks: asked for once per outcome, run by the DAG processor in the file's
        # code without waiting for its next load
        wait_until(
            lambda: (
                not DagCallbackRequest.objects.exclude(state__in=["success", "failed"]).exists()
            ),
            timeout=120,
            what=f"the callbacks\n{processor_out.read_text()[-20000:]}",
        )
        assert processor.poll() is None
    finally:
        worker.process.terminate()
        worker.wait(timeout=60)
        processor.send_signal(signal.SIGTERM)
        processor.wait(timeout=120)
    assert (_state("past", "first"), _state("past", "second")) == ("success", "success")
    first_end = TaskInstance.objects.get(dag_run=first).end_date
    assert TaskInstance.objects.get(dag_run=second).start_date >= first_end

    # the states Airflow gives
    assert {key: _state(*key) for key in keys} == {
        ("cb_ok", "r1"): "success",
        ("cb_fail", "r1"): "failed",
        ("cb_broken", "r1"): "success",
        ("backoff", "r1"): "failed",
        ("skipper", "r1"): "success",
        ("too_slow", "r1"): "failed",
    }
    # dagrun_timeout: the run failed, its running task was skipped and its runner stopped it
    # (its heartbeat was refused: checked above, while the worker ran)
    assert TaskInstance.objects.get(dag_id="too_slow").state == "skipped"
    assert not (out / "sleepy.finished").exists()
    # the task-level on_skipped_callback ran (Airflow's task runner runs it under the worker)
    assert TaskInstance.objects.get(dag_id="skipper").state == "skipped"
    assert (out / "skipped").read_text() == "skip_me"

    # backoff: each retry waited Airflow's delay for its try (1 s doubled, capped at 3 s)
    flaky_ti = TaskInstance.objects.get(dag_id="backoff")
    assert (flaky_ti.state, flaky_ti.try_number) == ("failed", 4)
    history = list(TaskInstanceHistory.objects.filter(dag_id="backoff").order_by("try_number"))
    logical_date = DagRun.objects.get(dag_id="backoff").logical_date
    policy = RetryPolicy(retry_delay=1, retry_exponential_backoff=2.0, max_retry_delay=3)
    nexts = [*history[1:], flaky_ti]
    for earlier, later in zip(history, nexts, strict=True):
        delay = retry_delay_seconds(
            policy,
            dag_id="backoff",
            task_id="flaky",
            logical_date=logical_date,
            try_number=earlier.try_number,
        )
        assert later.start_date - earlier.end_date >= timedelta(seconds=delay), earlier

    requests = {r.dag_id: (r.kind, r.reason) for r in DagCallbackRequest.objects.all()}
    assert requests == {
        "cb_ok": ("success", "success"),
        "cb_fail": ("failure", "task_failure"),
        "cb_broken": ("success", "success"),
    }
    log = processor_out.read_text()
    assert (out / "cb_ok.success").read_text() == "r1 success", log
    assert "callback on_success_callback of cb_ok / r1 ran" in log
    ran = [line for line in log.splitlines() if line.startswith("callback ")]
    assert sorted(ran) == [
        "callback on_failure_callback of cb_fail / r1 failed: 1 of 2 callback(s) failed: "
        "RuntimeError: the callback broke",
        "callback on_success_callback of cb_broken / r1 failed: 1 of 1 callback(s) failed: "
        "RuntimeError: the callback broke",
        "callback on_success_callback of cb_ok / r1 ran",
    ], log
    assert (out / "cb_fail.failure").read_text() == "r1 task_failure"
    assert not (out / "cb_ok.failure").exists()
    done = {r.dag_id: r for r in DagCallbackRequest.objects.all()}
    assert done["cb_ok"].state == "success"
    assert done["cb_fail"].state == "failed"  # one of its two callbacks raised; both ran
    assert "RuntimeError: the callback broke" in done["cb_fail"].error
    assert done["cb_broken"].state == "failed"
    assert _state("cb_broken", "r1") == "success"  # a failed callback never changes its run
    # run once: a second pass has nothing to run
    again = StringIO()
    call_command("dag_processor", str(folder), "--once", stdout=again)
    assert "callback" not in again.getvalue()
