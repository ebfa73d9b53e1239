"""Deferrable operators in real processes (docs/triggerer.md): a real Airflow DAG file's
deferrable ``TimeDeltaSensor`` and ``TaskDeferred`` operators run through a real
``manage.py worker`` (deferred, its slot freed), a real ``manage.py triggerer`` (Airflow's
``DateTimeTrigger`` / ``TimeDeltaTrigger`` fire) and the worker again (``next_method`` with
the event) to success; a trigger that raises and a deferral past its timeout fail their
task instance as in Airflow. Two triggerers, one killed with ``kill -9`` while its triggers
run: the other takes them over and every task instance resumes exactly once. Skipped
without Airflow's task SDK and core."""

from __future__ import annotations

import importlib.util
import signal
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from assets_app.models import Dag, DagRun, TaskInstance, Trigger, Triggerer
from assets_app.services.dags.declare import dags_set_paused
from assets_app.services.runs.dag_runs import dag_run_trigger
from assets_app.services.secrets.connections import ConnectionFields, connection_create
from tests.executionapi.conftest import airflow_sdk  # noqa: F401 (a fixture)
from tests.live_server import REPO, server_env
from tests.runtime.worker.conftest import WorkerProcess, dags_folder_load, wait_until

pytestmark = pytest.mark.slow

if importlib.util.find_spec("airflow.dag_processing") is None:  # pragma: no cover
    pytest.skip("apache-airflow-core is not installed", allow_module_level=True)

DEFERRING = """
import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

from airflow.providers.standard.sensors.date_time import DateTimeSensorAsync
from airflow.providers.standard.sensors.filesystem import FileSensor
from airflow.providers.standard.sensors.time_delta import TimeDeltaSensor
from airflow.providers.standard.triggers.temporal import DateTimeTrigger, TimeDeltaTrigger
from airflow.sdk import DAG, BaseOperator, task
from airflow.sdk.exceptions import TaskDeferred
from airflow.triggers.base import BaseTrigger


class Raises(BaseTrigger):
    # the triggerer imports it from tests/runtime/worker/deferred_triggers.py
    def serialize(self):
        return ("tests.runtime.worker.deferred_triggers.Raises", {"why": "the sky fell"})

    async def run(self):
        yield None


class Defers(BaseOperator):
    def __init__(self, *, seconds, timeout=None, trigger=None, **kwargs):
        super().__init__(**kwargs)
        self.seconds = seconds
        self.defer_timeout = timeout
        self.trigger = trigger

    def execute(self, context):
        moment = datetime.now(timezone.utc) + timedelta(seconds=self.seconds)
        trigger = Raises() if self.trigger == "raises" else DateTimeTrigger(moment=moment)
        raise TaskDeferred(
            trigger=trigger,
            method_name="resumed",
            kwargs={"kept": "yes"},
            timeout=self.defer_timeout,
        )

    def resumed(self, context, kept, event=None):
        out = os.environ.get("WORKER_TEST_OUT")
        if out:
            with (Path(out) / "resumed.txt").open("a") as marks:
                marks.write(f"{context['dag_run'].dag_id}.{self.task_id}\\n")
        return {"kept": kept, "event": str(event)}


with DAG("deferring", schedule=None, start_date=datetime(2026, 1, 1)):
    # 30 s from the run's start: a loaded machine's worker reaches them before, so they defer
    wait = TimeDeltaSensor(task_id="wait", delta=timedelta(seconds=30), deferrable=True)
    own = Defers(task_id="own", seconds=2)

    @task
    def after():
        return "after"

    wait >> after()
    Defers(task_id="raises", seconds=0, trigger="raises")
    Defers(task_id="times_out", seconds=3600, timeout=timedelta(seconds=2))
    DateTimeSensorAsync(
        task_id="until", target_time=datetime.now(timezone.utc) + timedelta(seconds=1)
    )
    FileSensor(task_id="file", filepath="__FILE__", deferrable=True, poke_interval=0.5)
    TimeDeltaSensor(
        task_id="ends_there", delta=timedelta(seconds=30), deferrable=True, end_from_trigger=True
    )
    DateTimeSensorAsync(
        task_id="starts_here",
        target_time=datetime.now(timezone.utc) + timedelta(seconds=1),
        start_from_trigger=True,
    )

with DAG("task_defers", schedule=None, start_date=datetime(2026, 1, 1)):
    @task
    def defers_itself():
        raise TaskDeferred(trigger=TimeDeltaTrigger(timedelta(seconds=1)), method_name="execute")

    defers_itself()

with DAG("many", schedule=None, start_date=datetime(2026, 1, 1)):
    for n in range(8):
        Defers(task_id=f"w{n}", seconds=40)
"""


def start_triggerer(tmp_path: Path, *args: str) -> WorkerProcess:
    n = len(list(tmp_path.glob("triggerer-*.out")))
    out_path = tmp_path / f"triggerer-{n}.out"
    with out_path.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "triggerer", "--interval", "0.2", *args],
            cwd=REPO,
            env=server_env(
                TRIGGERER_HEALTH_CHECK_THRESHOLD="3",
                AIRFLOW_HOME=str(tmp_path / "airflow_home"),
            ),
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
        )
    return WorkerProcess(process, out_path)


def start_scheduler(tmp_path: Path) -> WorkerProcess:
    out_path = tmp_path / "scheduler.out"
    with out_path.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "scheduler", "--interval", "0.5"],
            cwd=REPO,
            env=server_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
        )
    return WorkerProcess(process, out_path)


def stop(*processes: WorkerProcess) -> None:
    for one in processes:
        if one.process.poll() is None:
            one.process.terminate()
    for one in processes:
        try:
            one.wait(timeout=60)
        except subprocess.TimeoutExpired:
            one.process.kill()


def waited(condition, *processes: WorkerProcess, timeout: float, what: str) -> None:
    """``wait_until``, a timeout naming what the processes printed (read then, not before)."""
    try:
        wait_until(condition, timeout=timeout, what=what)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{outputs(*processes)}") from None


def outputs(*processes: WorkerProcess) -> str:
    return "\n".join(f"--- {p.out_path.name}\n{p.output()[-8000:]}" for p in processes)


@pytest.fixture
def deferring_dags(airflow_sdk, server, settings, tmp_path):  # noqa: F811
    folder = tmp_path / "dags"
    folder.mkdir()
    awaited = tmp_path / "awaited.txt"  # FileSensor's file, made once it defers
    (folder / "deferring.py").write_text(
        textwrap.dedent(DEFERRING).replace("__FILE__", str(awaited))
    )
    out = dags_folder_load(folder, settings=settings, parser_home=tmp_path / "parser_home")
    # deferrable operators, DateTimeSensorAsync, FileSensor(deferrable=True) and a @task
    # raising TaskDeferred load
    assert set(Dag.objects.values_list("dag_id", flat=True)) == {
        "deferring",
        "many",
        "task_defers",
    }, out
    connection_create(
        conn_id="fs_default", values=ConnectionFields(conn_type="fs", extra='{"path": "/"}')
    )
    dags_set_paused(dag_ids=["deferring", "many"], is_paused=False)
    return awaited


def worker_env(tmp_path: Path) -> dict[str, str]:
    return {
        "AIRFLOW_HOME": str(tmp_path / "airflow_home"),
        "AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": "1",
    }


def held_by() -> Counter[int]:
    """How many triggers each triggerer holds."""
    return Counter(
        Trigger.objects.filter(triggerer__isnull=False).values_list("triggerer", flat=True)
    )


def states(dag_id: str) -> dict[str, str | None]:
    return dict(TaskInstance.objects.filter(dag_id=dag_id).values_list("task_id", "state"))


@pytest.mark.timeout(600)
def test_deferrable_tasks_defer_free_their_slot_and_resume_through_the_triggerer(
    deferring_dags, start_worker, marker_dir, tmp_path
):
    run = dag_run_trigger(dag_id="deferring")
    # one slot: the four deferring tasks only all get through because a deferral frees it
    worker = start_worker("--concurrency", "1", env=worker_env(tmp_path))
    waited(
        lambda: TaskInstance.objects.filter(dag_id="deferring", state="deferred").count() >= 2,
        worker,
        timeout=240,
        what="two deferred task instances",
    )
    deferred_at_once = TaskInstance.objects.filter(dag_id="deferring", state="deferred").count()
    triggerer = start_triggerer(tmp_path)
    scheduler = start_scheduler(tmp_path)
    try:
        waited(
            lambda: TaskInstance.objects.filter(
                dag_id="deferring", task_id="file", state="deferred"
            ).exists(),
            worker,
            triggerer,
            timeout=240,
            what="FileSensor deferred",
        )
        deferring_dags.write_text("here")
        waited(
            lambda: DagRun.objects.get(pk=run.pk).state in ("success", "failed"),
            worker,
            triggerer,
            scheduler,
            timeout=400,
            what="the run to end",
        )
    finally:
        stop(worker, triggerer, scheduler)

    logs = outputs(worker, triggerer, scheduler)
    assert deferred_at_once >= 2, logs
    assert states("deferring") == {
        "wait": "success",
        "after": "success",
        "own": "success",
        "raises": "failed",
        "times_out": "failed",
        "until": "success",
        "file": "success",
        "starts_here": "success",
        "ends_there": "success",
    }, logs
    # end_from_trigger: the triggerer ended it; the worker only ran it up to its deferral
    started = [
        line
        for line in worker.output().splitlines()
        if line.startswith("started deferring.ends_there")
    ]
    assert len(started) == 1, started
    assert "deferring.ends_there" in triggerer.output(), logs
    assert "(ended success by its trigger)" in triggerer.output(), logs
    # start_from_trigger: deferred by a pass, not by a worker; a worker ran only its resume
    ran = [
        line
        for line in worker.output().splitlines()
        if line.startswith("finished deferring.starts_here")
    ]
    assert len(ran) == 1, ran
    assert "try 1: success" in ran[0], ran
    # resumed on the same try, with its next_kwargs and the event
    own = TaskInstance.objects.get(dag_id="deferring", task_id="own")
    assert own.try_number == 1
    assert own.next_method is None  # a success clears them
    from assets_app.models import XCom

    value = XCom.objects.get(dag_id="deferring", task_id="own", key="return_value").value
    assert value["kept"] == "yes"
    assert value["event"].endswith("+00:00"), value  # DateTimeTrigger's payload: the moment
    marks = Counter((marker_dir / "resumed.txt").read_text().split())
    assert marks == Counter({"deferring.own": 1}), marks
    assert "resumed deferring.own" in triggerer.output(), logs
    assert "resumed deferring.wait" in triggerer.output(), logs  # TimeDeltaSensor deferred
    assert "trigger failed: deferring.raises" in triggerer.output(), logs
    # the failures are Airflow's: the trigger's traceback, TaskDeferralTimeout
    logs_dir = tmp_path / "task_logs"
    raised = "\n".join(
        p.read_text() for p in logs_dir.rglob("*") if "raises" in str(p) and p.is_file()
    )
    assert "the sky fell" in raised, raised[-4000:]
    timed = "\n".join(
        p.read_text() for p in logs_dir.rglob("*") if "times_out" in str(p) and p.is_file()
    )
    assert "TaskDeferralTimeout" in timed, timed[-4000:]
    assert Trigger.objects.count() == 0
    assert DagRun.objects.get(pk=run.pk).state == "failed"  # two leaves failed, as in Airflow


@pytest.mark.timeout(600)
def test_a_triggerer_killed_mid_trigger_hands_over_and_every_task_resumes_once(
    deferring_dags, start_worker, marker_dir, tmp_path
):
    run = dag_run_trigger(dag_id="many")
    worker = start_worker("--concurrency", "4", env=worker_env(tmp_path))
    first = start_triggerer(tmp_path, "--capacity", "4")
    second = start_triggerer(tmp_path, "--capacity", "4")
    try:
        # both hold four running triggers (8 deferred, capacity 4 each)
        waited(
            lambda: sorted(held_by().values()) == [4, 4],
            worker,
            first,
            second,
            timeout=240,
            what="8 claimed triggers",
        )
        doomed = Triggerer.objects.get(pid=first.process.pid)
        held = Trigger.objects.filter(triggerer=doomed).count()
        first.process.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
        waited(
            lambda: DagRun.objects.get(pk=run.pk).state in ("success", "failed"),
            worker,
            first,
            second,
            timeout=300,
            what="the run to end",
        )
    finally:
        stop(worker, first, second)

    logs = outputs(worker, first, second)
    assert held == 4, logs
    assert set(states("many").values()) == {"success"}, logs
    assert TaskInstance.objects.filter(dag_id="many", try_number=1).count() == 8
    marks = Counter((marker_dir / "resumed.txt").read_text().split())
    assert marks == Counter({f"many.w{n}": 1 for n in range(8)}), marks
    assert "released 4 trigger(s) of dead triggerer(s)" in second.output(), logs
