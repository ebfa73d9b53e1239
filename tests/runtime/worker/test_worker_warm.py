"""The worker's warm parent (``runtime.warm``), with real worker, parent, supervisor and task
processes against a live server: tasks are forked from one parent, what a task changes does
not reach the next one, an edited DAG file runs its new code, a kill -9 of a task, of the
parent or of the whole worker tree leaves every task instance final and none run twice at
once, ``execution_timeout`` and heartbeats work as before, and a parent that cannot start
leaves the tasks to new processes. Skipped without ``apache-airflow-task-sdk``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from assets_app.models import TaskInstance
from tests.executionapi.conftest import airflow_sdk  # noqa: F401 (a fixture)
from tests.live_server import REPO, server_env
from tests.runtime.worker.conftest import declare, scheduled_task_instances, wait_until

pytestmark = pytest.mark.slow

DAG_ID = "warm_worker_test"

#: The DAG file: each task writes what it saw to $WORKER_TEST_OUT/<task>-<run>.json.
DAG_FILE = """
import json
import os
import sys
import time
from datetime import datetime, timedelta

from airflow.sdk import dag, task

import warm_helper

VERSION = "{version}"
TOUCHED = []


def record(name, **extra):
    import airflow.sdk

    out = os.environ["WORKER_TEST_OUT"]
    ctx = airflow.sdk.get_current_context()
    supervisor = os.getppid()
    with open(f"/proc/{{supervisor}}/stat") as stat:
        parent = int(stat.read().rsplit(")", 1)[1].split()[1])
    path = os.path.join(out, f"{{name}}-{{ctx['run_id']}}.json")
    with open(path, "w") as file:
        json.dump(
            {{"pid": os.getpid(), "supervisor": supervisor, "parent": parent,
              "version": VERSION, "helper": warm_helper.VERSION, **extra}},
            file,
        )


@dag(dag_id="{dag_id}", schedule=None, start_date=datetime(2024, 1, 1), catchup=False)
def warm_worker_test():
    @task
    def dirty():
        import csv  # noqa: F401  (a module this process now has)

        sys.modules["warm_test_leak"] = sys
        os.environ["WARM_TEST_LEAK"] = "1"
        os.chdir("/")
        TOUCHED.append("dirty")
        warm_helper.STATE.append("dirty")
        record("dirty")

    @task
    def clean():
        record(
            "clean",
            leaked_module="warm_test_leak" in sys.modules,
            leaked_env="WARM_TEST_LEAK" in os.environ,
            cwd=os.getcwd(),
            touched=list(TOUCHED),
            helper_state=list(warm_helper.STATE),
        )

    @task
    def sleepy():
        record("sleepy_start")
        time.sleep(float(os.environ.get("WARM_TEST_SLEEP", "6")))
        record("sleepy")

    @task(execution_timeout=timedelta(seconds=2))
    def too_long():
        record("too_long_start")
        time.sleep(60)

    dirty()
    clean()
    sleepy()
    too_long()


warm_worker_test()
"""

HELPER = 'VERSION = "{version}"\nSTATE = []\n'

TASKS = ["dirty", "clean", "sleepy", "too_long"]


def write_dag(folder: Path, version: str) -> Path:
    """The DAG file and its helper module at ``version`` (their modification times moved on,
    as an editor would)."""
    folder.mkdir(exist_ok=True)
    path = folder / "warm_dag.py"
    for file, text in (
        (path, DAG_FILE.format(version=version, dag_id=DAG_ID)),
        (folder / "warm_helper.py", HELPER.format(version=version)),
    ):
        before = file.stat().st_mtime_ns if file.exists() else 0
        file.write_text(text)
        stamp = max(time.time_ns(), before + 1_000_000_000)
        os.utime(file, ns=(stamp, stamp))
    return path


def declare_dag(folder: Path, version: str = "v1") -> None:
    path = write_dag(folder, version)
    declare(
        [
            {
                "dag_id": DAG_ID,
                "airflow_dag_file": str(path),
                "tasks": [{"task_id": task_id} for task_id in TASKS],
            }
        ],
        base_dir=folder,
    )


def seen(marker_dir: Path, name: str, ti: TaskInstance) -> dict:
    return json.loads((marker_dir / f"{name}-{ti.run_id}.json").read_text())


def state(ti: TaskInstance) -> str | None:
    return TaskInstance.objects.get(pk=ti.pk).state


WORKER_ENV = {"AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": "1"}


def worker_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"AIRFLOW_HOME": str(tmp_path / "airflow_home"), **WORKER_ENV, **extra}


def test_tasks_fork_from_one_warm_parent_and_what_one_changes_does_not_reach_the_next(
    airflow_sdk,  # noqa: F811
    start_worker,
    marker_dir,
    tmp_path,
):
    # given a DAG file whose first task changes sys.modules, os.environ, the working
    # directory, a global of the DAG file and one of a module it imports
    declare_dag(tmp_path / "dags")
    (dirty,) = scheduled_task_instances(DAG_ID, "dirty", 1)
    (clean,) = scheduled_task_instances(DAG_ID, "clean", 1)

    # when one worker runs one after the other
    worker = start_worker("--concurrency", "1", "--max-tasks", "2", env=worker_env(tmp_path))

    # then both succeed, forked by the same warm parent (not the worker), and the second saw
    # none of the first's changes
    assert worker.wait(timeout=240) == 0, worker.output()
    assert (state(dirty), state(clean)) == ("success", "success"), worker.output()
    first, second = seen(marker_dir, "dirty", dirty), seen(marker_dir, "clean", clean)
    assert first["parent"] == second["parent"] != worker.process.pid
    assert "warm parent started" in worker.output()
    assert second["leaked_module"] is False
    assert second["leaked_env"] is False
    assert second["cwd"] == str(REPO)
    assert second["touched"] == []
    assert second["helper_state"] == []


def test_an_edited_dag_file_and_helper_module_run_their_new_code(
    airflow_sdk,  # noqa: F811
    start_worker,
    marker_dir,
    tmp_path,
):
    # given a worker that ran a task of the DAG file at v1
    folder = tmp_path / "dags"
    declare_dag(folder, "v1")
    worker = start_worker("--concurrency", "1", env=worker_env(tmp_path))
    (first,) = scheduled_task_instances(DAG_ID, "clean", 1)
    wait_until(lambda: state(first) == "success", timeout=180, what="the first run")

    # when the file and its helper change, and the task runs again on the same worker
    write_dag(folder, "v2")
    run = first.dag_run
    second = TaskInstance.objects.create(
        dag_run=type(run).objects.create(dag_id=DAG_ID, run_id="manual__again", state="queued"),
        dag_id=DAG_ID,
        run_id="manual__again",
        task_id="clean",
        state="scheduled",
    )
    wait_until(lambda: state(second) == "success", timeout=180, what="the second run")

    # then it ran the new code, from the same warm parent
    before, after = seen(marker_dir, "clean", first), seen(marker_dir, "clean", second)
    assert (before["version"], before["helper"]) == ("v1", "v1")
    assert (after["version"], after["helper"]) == ("v2", "v2"), worker.output()
    assert before["parent"] == after["parent"]
    worker.signal(signal.SIGTERM)
    assert worker.wait(timeout=60) == 0, worker.output()


def test_kill_9_of_a_task_and_of_the_warm_parent_leave_every_task_instance_final(
    airflow_sdk,  # noqa: F811
    start_worker,
    marker_dir,
    tmp_path,
):
    # given a worker running two long tasks from its warm parent
    declare_dag(tmp_path / "dags")
    killed_task, survivor = scheduled_task_instances(DAG_ID, "sleepy", 2)
    worker = start_worker("--concurrency", "2", env=worker_env(tmp_path, WARM_TEST_SLEEP="8"))
    for ti in (killed_task, survivor):
        wait_until(
            lambda ti=ti: (marker_dir / f"sleepy_start-{ti.run_id}.json").exists(),
            timeout=180,
            what="the tasks to start",
        )
    task = seen(marker_dir, "sleepy_start", killed_task)
    parent = task["parent"]

    # when one task's process and then the warm parent are killed with SIGKILL
    os.kill(task["pid"], signal.SIGKILL)
    os.kill(parent, signal.SIGKILL)

    # then the killed task fails, the other one finishes, and a next task runs in a new parent
    wait_until(lambda: state(killed_task) == "failed", timeout=60, what="the killed task")
    wait_until(lambda: state(survivor) == "success", timeout=60, what="the other task")
    (after,) = scheduled_task_instances(DAG_ID, "clean", 1)
    wait_until(lambda: state(after) == "success", timeout=180, what="a task after the kill")
    assert seen(marker_dir, "clean", after)["parent"] not in (parent, worker.process.pid)
    worker.signal(signal.SIGTERM)
    assert worker.wait(timeout=60) == 0, worker.output()
    assert worker.output().count("warm parent started") == 2, worker.output()


def test_kill_9_of_the_whole_worker_tree_leaves_the_task_to_the_reaper(
    airflow_sdk,  # noqa: F811
    start_worker,
    marker_dir,
    tmp_path,
):
    # given a worker running a long task from its warm parent
    declare_dag(tmp_path / "dags")
    (ti,) = scheduled_task_instances(DAG_ID, "sleepy", 1)
    worker = start_worker(env=worker_env(tmp_path, WARM_TEST_SLEEP="60"))
    wait_until(
        lambda: (marker_dir / f"sleepy_start-{ti.run_id}.json").exists(),
        timeout=180,
        what="the task to start",
    )
    task = seen(marker_dir, "sleepy_start", ti)

    # when the worker, its warm parent, the supervisor and the task are killed with SIGKILL
    for pid in (worker.process.pid, task["parent"], task["supervisor"], task["pid"]):
        os.kill(pid, signal.SIGKILL)
    worker.wait(timeout=30)
    assert state(ti) == "running"

    # then the scheduler's heartbeat timeout ends it (no retries: failed), and nothing runs it
    time.sleep(2)
    subprocess.run(
        [sys.executable, "manage.py", "scheduler", "--once"],
        cwd=REPO,
        env=server_env(TASK_INSTANCE_HEARTBEAT_TIMEOUT="1"),
        check=True,
        capture_output=True,
        timeout=120,
    )
    assert state(ti) == "failed"
    assert not (marker_dir / f"sleepy-{ti.run_id}.json").exists()


def test_execution_timeout_and_heartbeats_work_as_before(
    airflow_sdk,  # noqa: F811
    start_worker,
    marker_dir,
    tmp_path,
):
    # given a task over its execution_timeout and one that runs for a few seconds
    declare_dag(tmp_path / "dags")
    (late,) = scheduled_task_instances(DAG_ID, "too_long", 1)
    (slow,) = scheduled_task_instances(DAG_ID, "sleepy", 1)

    # when a worker runs them from its warm parent
    worker = start_worker(
        "--concurrency", "2", "--max-tasks", "2", env=worker_env(tmp_path, WARM_TEST_SLEEP="4")
    )

    # then the late one fails on its timeout, the slow one heartbeats and succeeds
    assert worker.wait(timeout=240) == 0, worker.output()
    assert state(late) == "failed", worker.output()
    assert state(slow) == "success", worker.output()
    slow_row = TaskInstance.objects.get(pk=slow.pk)
    assert slow_row.last_heartbeat_at is not None
    assert slow_row.last_heartbeat_at > slow_row.start_date
    assert "warm parent started" in worker.output()


def test_a_warm_parent_that_cannot_start_leaves_the_tasks_to_new_processes(
    airflow_sdk,  # noqa: F811
    start_worker,
    marker_dir,
    tmp_path,
):
    # given a warm parent's Python that does not exist
    declare_dag(tmp_path / "dags")
    (ti,) = scheduled_task_instances(DAG_ID, "clean", 1)

    # when a worker runs the task
    worker = start_worker(
        "--once", env=worker_env(tmp_path, WORKER_WARM_PYTHON=str(tmp_path / "no-python"))
    )

    # then it ran in a new process of the worker's own, and succeeded
    assert worker.wait(timeout=240) == 0, worker.output()
    assert state(ti) == "success", worker.output()
    assert "the warm parent could not start" in worker.output()
    assert seen(marker_dir, "clean", ti)["parent"] == worker.process.pid


def _running(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.parametrize("warm", ["true", "false"], ids=["warm", "new-process"])
def test_no_supervisor_lingers_after_its_tasks_final_state(
    airflow_sdk,  # noqa: F811
    start_worker,
    marker_dir,
    tmp_path,
    warm,
):
    # given Airflow's default min_heartbeat_interval (5 s), which the supervisor used to wait
    # out after its task process had exited
    declare_dag(tmp_path / "dags")
    (ti,) = scheduled_task_instances(DAG_ID, "clean", 1)
    worker = start_worker(env={"AIRFLOW_HOME": str(tmp_path / "airflow_home"), "WORKER_WARM": warm})

    # when the task has reported its final state
    wait_until(lambda: state(ti) == "success", timeout=180, what="the task's success")
    reported = time.monotonic()
    supervisor = seen(marker_dir, "clean", ti)["supervisor"]

    # then its supervisor is gone well before that interval
    wait_until(lambda: not _running(supervisor), timeout=30, what="the supervisor's exit")
    assert time.monotonic() - reported < 2.5
    worker.signal(signal.SIGTERM)
    assert worker.wait(timeout=60) == 0, worker.output()
