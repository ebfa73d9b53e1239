"""``manage.py worker`` as a real subprocess against a live gunicorn server: it claims
scheduled task instances, runs each through the ``task_sdk`` supervisor and reports it."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from assets_app.models import TaskInstance, TaskInstanceHistory
from assets_app.services.runs.claims import task_instances_claim
from runtime.worker import Worker
from tests.live_server import REPO, server_env
from tests.runtime.worker.conftest import (
    HERE,
    TASKS,
    declare,
    run_states,
    scheduled_task_instances,
    states,
    wait_until,
)

pytestmark = pytest.mark.slow


def test_once_runs_one_claim_up_to_the_concurrency_and_exits(start_worker, marker_dir):
    # given three runnable task instances
    declare([{"dag_id": "d", "tasks": [{"task_id": "t", "callable": f"{TASKS}:record_once"}]}])
    tis = scheduled_task_instances("d", "t", 3)

    # when a worker runs once with two slots
    worker = start_worker("--once", "--concurrency", "2")

    # then it ran the two oldest, each once, and left the third runnable
    assert worker.wait() == 0, worker.output()
    assert states(tis) == ["success", "success", "scheduled"], worker.output()
    assert run_states(tis) == ["success", "success", "queued"]
    assert sorted(p.name for p in marker_dir.iterdir()) == sorted(str(t.pk) for t in tis[:2])
    out = worker.output()
    assert out.count("finished d.t @ manual__t_") == 2
    assert "worker stopped: 2 task instance(s) run, 2 success, 0 failed" in out


def test_max_tasks_stops_after_that_many(start_worker, marker_dir):
    declare([{"dag_id": "d", "tasks": [{"task_id": "t", "callable": f"{TASKS}:record_once"}]}])
    tis = scheduled_task_instances("d", "t", 5)

    worker = start_worker("--max-tasks", "3", "--concurrency", "2")

    assert worker.wait() == 0, worker.output()
    assert states(tis) == ["success"] * 3 + ["scheduled"] * 2, worker.output()
    assert len(list(marker_dir.iterdir())) == 3
    assert "3 task instance(s) run, 3 success" in worker.output()


def test_a_task_whose_code_cannot_be_found_fails_with_the_message_and_the_worker_goes_on(
    start_worker, marker_dir
):
    # given tasks without code, with a missing file, with an import error, and a good one
    declare(
        [
            {
                "dag_id": "code",
                "tasks": [
                    {"task_id": "a_no_code"},
                    {"task_id": "b_missing_file", "callable": "no_such_file.py:func"},
                    {"task_id": "c_import_error", "callable": "broken_import.py:task"},
                    {"task_id": "d_no_function", "callable": f"{TASKS}:no_such_function"},
                    {"task_id": "e_good", "callable": f"{TASKS}:record_once"},
                ],
            },
            {
                "dag_id": "dagfile",
                "airflow_dag_file": "missing_dag.py",
                "tasks": [{"task_id": "f"}],
            },
        ]
    )
    tis = [
        scheduled_task_instances("code", task_id, 1)[0]
        for task_id in ("a_no_code", "b_missing_file", "c_import_error", "d_no_function", "e_good")
    ] + scheduled_task_instances("dagfile", "f", 1)

    # when one worker runs them all, one at a time
    worker = start_worker("--max-tasks", "6", "--concurrency", "1")

    # then each failed with its reason, the good one succeeded, the worker finished normally
    assert worker.wait() == 0, worker.output()
    out = worker.output()
    assert states(tis) == ["failed"] * 4 + ["success", "failed"], out
    assert run_states(tis) == ["failed"] * 4 + ["success", "failed"]
    assert (
        "code.a_no_code has no code to run: the manifest names no 'callable' for the task "
        "and no 'airflow_dag_file' for its DAG"
    ) in out
    assert f"task file not found: {HERE / 'no_such_file.py'}" in out
    assert "ModuleNotFoundError: No module named 'module_that_does_not_exist'" in out
    assert "has no attribute 'no_such_function'" in out
    assert f"dagfile.f: Airflow DAG file not found: {HERE / 'missing_dag.py'}" in out
    assert "6 task instance(s) run, 1 success, 5 failed" in out
    # the failures reported by the worker itself went through the execution API
    no_code = TaskInstance.objects.get(pk=tis[0].pk)
    assert no_code.start_date is not None
    assert no_code.end_date is not None
    # and the worker kept its reason (the failed patch has no field for it)
    assert no_code.failure_reason.startswith("code.a_no_code has no code to run: "), no_code


def test_a_task_that_exits_hard_fails_and_the_worker_runs_the_next(start_worker, marker_dir):
    # given a task that calls os._exit, and one that records where it runs
    declare(
        [
            {
                "dag_id": "d",
                "tasks": [
                    {"task_id": "a_exits", "callable": f"{TASKS}:exits_hard"},
                    {"task_id": "b_good", "callable": f"{TASKS}:record_cwd"},
                ],
            }
        ]
    )
    tis = [scheduled_task_instances("d", task_id, 1)[0] for task_id in ("a_exits", "b_good")]

    # when one worker runs both, one at a time
    worker = start_worker("--max-tasks", "2", "--concurrency", "1")

    # then the first failed with the reason, the worker went on with the second, which ran in
    # the worker's working directory with its environment (the marker folder)
    assert worker.wait() == 0, worker.output()
    out = worker.output()
    assert states(tis) == ["failed", "success"], out
    assert "task process exit code 3 without reporting a state" in out
    assert "2 task instance(s) run, 1 success, 1 failed" in out
    assert (marker_dir / str(tis[1].pk)).read_text() == f"cwd {REPO}"


def test_sigterm_lets_a_running_task_finish_within_the_grace_period(start_worker, marker_dir):
    declare(
        [{"dag_id": "d", "tasks": [{"task_id": "t", "callable": f"{TASKS}:sleep_then_record"}]}]
    )
    (ti,) = scheduled_task_instances("d", "t", 1)
    worker = start_worker("--grace-period", "60")
    wait_until(lambda: states([ti]) == ["running"], what="the task to start")

    worker.signal(signal.SIGTERM)

    assert worker.wait() == 0, worker.output()
    assert states([ti]) == ["success"], worker.output()
    assert (marker_dir / str(ti.pk)).read_text() == "finished"
    assert "stopping: waiting up to 60s for 1 running task(s)" in worker.output()


@pytest.mark.parametrize(
    "mode", [pytest.param(("--concurrency", "1"), id="loop"), pytest.param(("--once",), id="once")]
)
def test_sigterm_ends_a_long_task_after_the_grace_period_and_it_is_reported(
    start_worker, marker_dir, mode
):
    # given a long task running, with a retry left, and another one that no slot was free for
    declare(
        [
            {
                "dag_id": "d",
                "tasks": [
                    {"task_id": "t", "callable": f"{TASKS}:sleep_long", "retries": 1},
                    {"task_id": "u", "callable": f"{TASKS}:record_once"},
                ],
            }
        ]
    )
    (long_ti,) = scheduled_task_instances("d", "t", 1)
    TaskInstance.objects.filter(pk=long_ti.pk).update(max_tries=1)
    worker = start_worker("--grace-period", "1", *mode)
    wait_until(lambda: (marker_dir / str(long_ti.pk)).exists(), what="the task to start")
    (waiting,) = scheduled_task_instances("d", "u", 1)

    # when the worker gets SIGTERM
    started = time.monotonic()
    worker.signal(signal.SIGTERM)

    # then it ends the task after the grace period: reported up_for_retry, not left running;
    # the other task instance was never claimed
    assert worker.wait(timeout=60) == 0, worker.output()
    assert time.monotonic() - started < 30
    assert states([long_ti, waiting]) == ["up_for_retry", "scheduled"], worker.output()
    assert run_states([long_ti]) == ["running"]  # a retry is coming
    out = worker.output()
    assert "terminating 1 running task(s)" in out
    assert "finished d.t @ manual__t_0 try 1: up_for_retry" in out


def test_a_task_instance_claimed_but_not_started_when_stopping_is_given_back(
    transactional_db, tmp_path
):
    declare([{"dag_id": "d", "tasks": [{"task_id": "t", "callable": f"{TASKS}:record_once"}]}])
    tis = scheduled_task_instances("d", "t", 2)
    worker = Worker(server="http://127.0.0.1:9", log_dir=tmp_path, report=lambda line: None)
    claimed = task_instances_claim(limit=2)
    assert states(tis) == ["queued", "queued"]

    worker.request_stop()
    worker._start_all([(ti, None) for ti in claimed])  # a stop came right after the claim

    assert states(tis) == ["scheduled", "scheduled"]
    assert worker.summary.given_back == 2


def test_a_runner_that_exits_before_run_gives_its_task_instance_back(tmp_path, transactional_db):
    # given a server that does not answer: the task_sdk runner gives up before /run
    declare([{"dag_id": "d", "tasks": [{"task_id": "t", "callable": f"{TASKS}:record_once"}]}])
    (ti,) = scheduled_task_instances("d", "t", 1)
    lines: list[str] = []
    worker = Worker(server="http://127.0.0.1:9", log_dir=tmp_path, once=True, report=lines.append)

    summary = worker.run()

    assert states([ti]) == ["scheduled"], lines
    assert summary.given_back == 1
    assert any("before starting the task" in line for line in lines), lines


def test_a_failed_try_with_retries_left_is_run_again_by_the_worker(
    start_worker, marker_dir, server, tmp_path
):
    # given a task that fails its first try, with one retry and no delay
    declare(
        [
            {
                "dag_id": "d",
                "tasks": [
                    {
                        "task_id": "t",
                        "callable": f"{TASKS}:fail_first_try",
                        "retries": 1,
                        "retry_delay": 0,
                    }
                ],
            }
        ]
    )
    (ti,) = scheduled_task_instances("d", "t", 1)
    TaskInstance.objects.filter(pk=ti.pk).update(max_tries=1)

    # when a worker runs it, next to a scheduler (whose upkeep schedules the due retry)
    worker = start_worker()
    with (tmp_path / "scheduler.out").open("w") as out:
        scheduler = subprocess.Popen(
            [sys.executable, "manage.py", "scheduler", "--interval", "0.2"],
            cwd=REPO,
            env=server_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_until(lambda: states([ti]) == ["success"], timeout=90, what="the second try")
    finally:
        scheduler.send_signal(signal.SIGTERM)
        scheduler.wait(timeout=30)
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output()

    # then the first try is kept as failed, the second succeeded, the run is success
    out = worker.output()
    assert "finished d.t @ manual__t_0 try 1: up_for_retry" in out
    assert "RuntimeError: the first try fails" in out
    assert "finished d.t @ manual__t_0 try 2: success" in out
    now = TaskInstance.objects.get(dag_run_id=ti.dag_run_id)
    assert (now.try_number, now.state) == (2, "success")
    assert now.pk != ti.pk  # a new try has a new id
    [first] = TaskInstanceHistory.objects.filter(dag_run_id=ti.dag_run_id)
    assert (first.task_instance_id, first.try_number, first.state) == (ti.pk, 1, "failed")
    assert first.failure_reason == "RuntimeError: the first try fails"  # task_sdk's retry_reason
    assert (marker_dir / str(now.pk)).read_text() == "try 2"
    assert run_states([ti]) == ["success"]
