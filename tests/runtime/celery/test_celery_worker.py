"""``EXECUTOR=celery`` with real processes: a live server, the scheduler's dispatch (run here,
in the test's process, against the same database), a real broker (RabbitMQ and Redis, both on
this machine) and ``manage.py celery_worker`` processes whose environment holds no database
URL and no secret.

- a worker with only ``CELERY_BROKER_URL``, ``EXECUTION_API_URL`` and the DAG folder runs a
  real DAG file's tasks to success, on the Celery queue its task names;
- a worker killed with SIGKILL mid-task leaves its task instance final, and the broker's
  redelivery to another worker is refused (409): the task ran once;
- a workload delivered twice runs once;
- a worker machine dying mid-task (the worker and its task's processes killed at once) leaves
  the task instance to the scheduler's heartbeat timeout, and the redelivery is refused;
- a broker killed and restarted mid-task (a Redis of the test's own) loses nothing and runs
  nothing twice;
- a real scheduler (``EXECUTOR=celery``) sends a triggered run's tasks, on the queue their DAG
  file names, and the run succeeds.

Run in the PostgreSQL lane only (a Celery deployment's database). Skipped when a broker does not
answer (failed with ``CELERY_BROKERS_REQUIRED``, as in CI), or without Apache Airflow's task
SDK."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest

from assets_app.models import Dag, DagRun, DagTask, TaskInstance
from assets_app.services.runs.dag_runs import dag_run_trigger
from assets_app.services.scheduling.upkeep import upkeep_pass
from operatorapi.executor import celery_workers_seen
from runtime.celery_app import celery_app
from runtime.celery_dispatch import CelerySender, Sendable, task_instances_dispatch
from runtime.celery_worker import NOT_NEEDED
from tests.executionapi.conftest import airflow_sdk  # noqa: F401 (a fixture)
from tests.live_server import REPO, server_env
from tests.runtime.worker.conftest import (
    dags_folder_load,
    declare,
    scheduled_task_instances,
    wait_until,
)

# a Celery deployment's server is PostgreSQL's (docs/deployment.md); its tests are of brokers
# and workers, run once, in the PostgreSQL lane
pytestmark = [pytest.mark.slow, pytest.mark.postgres]

BROKERS = {
    "rabbitmq": os.environ.get("TEST_RABBITMQ_URL", "amqp://guest:guest@127.0.0.1:5672//"),
    "redis": os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0"),
}
#: Redis hands an unacknowledged message to another worker after this many seconds.
VISIBILITY = 4

DAG_ID = "celery_worker_test"
DAG_FILE = """
import json
import os
import time
from datetime import datetime

from airflow.sdk import dag, task


def record(name):
    import airflow.sdk

    ctx = airflow.sdk.get_current_context()
    seen = {{
        "pid": os.getpid(),
        "env": sorted(k for k in os.environ if k in {not_needed} or k.startswith("PG")),
        "try_number": ctx["ti"].try_number,
    }}
    if not os.environ.get("WORKER_TEST_OUT"):  # a worker started by the docs' recipe
        return
    path = os.path.join(os.environ["WORKER_TEST_OUT"], f"{{name}}-{{ctx['run_id']}}.jsonl")
    with open(path, "a") as file:
        file.write(json.dumps(seen) + "\\n")


@dag(dag_id="{dag_id}", schedule=None, start_date=datetime(2024, 1, 1), catchup=False)
def celery_worker_test():
    @task
    def quick():
        record("quick")

    @task
    def sleepy():
        record("sleepy_start")
        time.sleep(float(os.environ.get("CELERY_TEST_SLEEP", "8")))
        record("sleepy")

    quick()
    sleepy()


celery_worker_test()
"""


def _reachable(url: str) -> bool:
    parsed = urlparse(url)
    try:
        with socket.create_connection((parsed.hostname or "", parsed.port or 0), timeout=2):
            return True
    except OSError:
        return False


@pytest.fixture(params=sorted(BROKERS))
def broker(request: pytest.FixtureRequest) -> str:
    url = BROKERS[request.param]
    if not _reachable(url):
        if os.environ.get("CELERY_BROKERS_REQUIRED"):  # CI (.ci/run) starts both
            pytest.fail(f"{request.param} does not answer at {url}")
        pytest.skip(f"{request.param} does not answer at {url}")
    return url


@pytest.fixture
def queue(broker: str) -> Iterator[str]:
    """A queue of the test's own (nothing left by another run reaches it), deleted after."""
    name = f"test_{uuid.uuid4().hex[:12]}"
    yield name
    app = celery_app(broker_url=broker)
    with app.connection_for_write() as connection:
        channel = connection.default_channel
        try:
            channel.queue_purge(name)
            channel.queue_delete(name)
        except Exception:  # noqa: S110 - a queue never made
            pass


@dataclass
class CeleryWorker:
    process: subprocess.Popen[str]
    out_path: Path

    def output(self) -> str:
        return self.out_path.read_text(errors="replace")

    def environ(self) -> dict[str, str]:
        raw = Path(f"/proc/{self.process.pid}/environ").read_bytes()
        pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
        return {key.decode(): value.decode(errors="replace") for key, value in pairs}


@pytest.fixture
def dags_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "dags"
    folder.mkdir()
    (folder / "celery_dag.py").write_text(
        DAG_FILE.format(dag_id=DAG_ID, not_needed=repr(set(NOT_NEEDED)))
    )
    return folder


def launch_worker(
    *args: str,
    server_url: str,
    tmp_path: Path,
    dags_folder: Path,
    broker: str,
    queue: str,
    n: int = 0,
    extra: dict[str, str] | None = None,
) -> CeleryWorker:
    """Start ``manage.py celery_worker --queues queue ARGS`` with an environment that holds
    only what a worker machine holds (plus ``extra``), and wait until it is ready."""
    markers = tmp_path / "markers"
    markers.mkdir(exist_ok=True)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "PYTHONPATH": str(REPO),
        "PYTHONUNBUFFERED": "1",
        "CELERY_BROKER_URL": broker,
        "CELERY_VISIBILITY_TIMEOUT": str(VISIBILITY),
        "EXECUTION_API_URL": server_url,
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags_folder),
        "AIRFLOW_HOME": str(tmp_path / f"airflow_home_{n}"),
        "AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": "1",
        "WORKER_LOG_DIR": str(tmp_path / f"task_logs_{n}"),
        "WORKER_TEST_OUT": str(markers),
        **(extra or {}),
    }
    out_path = tmp_path / f"celery-worker-{n}.out"
    with out_path.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "celery_worker", "--queues", queue, *args],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
        )
    worker = CeleryWorker(process, out_path)
    wait_until(
        lambda: "ready." in worker.output() or worker.process.poll() is not None,
        timeout=60,
        what="the celery worker to be ready",
    )
    assert worker.process.poll() is None, worker.output()
    return worker


def stop(worker: CeleryWorker) -> None:
    if worker.process.poll() is None:
        worker.process.send_signal(signal.SIGTERM)
        try:
            worker.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            worker.process.kill()
            worker.process.wait()


@pytest.fixture
def start_celery_worker(
    server: Any, tmp_path: Path, dags_folder: Path, broker: str, queue: str
) -> Iterator[Callable[..., CeleryWorker]]:
    """``launch_worker`` on the test's broker and queue; stopped after the test."""
    started: list[CeleryWorker] = []

    def start(*args: str, extra: dict[str, str] | None = None) -> CeleryWorker:
        worker = launch_worker(
            *args,
            server_url=server.url,
            tmp_path=tmp_path,
            dags_folder=dags_folder,
            broker=broker,
            queue=queue,
            n=len(started),
            extra=extra,
        )
        started.append(worker)
        return worker

    yield start
    for worker in started:
        stop(worker)


def declare_dag(dags_folder: Path, queue: str) -> None:
    declare(
        [
            {
                "dag_id": DAG_ID,
                "airflow_dag_file": "celery_dag.py",
                "tasks": [
                    {"task_id": "quick", "queue": queue},
                    {"task_id": "sleepy", "queue": queue},
                ],
            }
        ],
        base_dir=dags_folder,
    )


def markers(tmp_path: Path, name: str, ti: TaskInstance) -> list[dict[str, Any]]:
    path = tmp_path / "markers" / f"{name}-{ti.run_id}.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def state(ti: TaskInstance) -> str | None:
    return TaskInstance.objects.get(pk=ti.pk).state


def sender(broker: str) -> CelerySender:
    return CelerySender(broker_url=broker, visibility_timeout=VISIBILITY)


def test_a_worker_without_database_or_secrets_runs_a_dag_files_tasks_on_their_queue(
    airflow_sdk,  # noqa: F811
    start_celery_worker,
    dags_folder,
    broker,
    queue,
    tmp_path,
):
    # given a DAG file whose tasks name the test's queue, and two of its task instances
    declare_dag(dags_folder, queue)
    assert set(DagTask.objects.filter(dag_id=DAG_ID).values_list("queue", flat=True)) == {queue}
    quick = scheduled_task_instances(DAG_ID, "quick", 2)

    # when a worker holding no database URL and no secret takes the queue, and the scheduler's
    # dispatch sends the task instances
    worker = start_celery_worker("--concurrency", "2")
    result = task_instances_dispatch(send=sender(broker))

    # then both were sent on the task's queue and ran to success on that worker
    assert sorted(str(s.task_instance_id) for s in result.sent) == sorted(str(t.pk) for t in quick)
    assert {s.queue for s in result.sent} == {queue}
    for ti in quick:
        wait_until(lambda ti=ti: state(ti) == "success", timeout=180, what=f"{ti} to succeed")
    # the worker (and so its tasks) held no credentials: it could neither reach the database
    # nor mint a token
    held = worker.environ()
    assert not [k for k in held if k in NOT_NEEDED or k.startswith("PG")], sorted(held)
    assert "postgres" not in " ".join(held.values())
    for ti in quick:
        (seen,) = markers(tmp_path, "quick", ti)
        assert seen["env"] == []
    wait_until(
        lambda: (
            worker.output().count("runtime.celery_worker: finished celery_worker_test.quick") == 2
        ),
        timeout=60,
        what="the worker to report both",
    )
    assert "does not need" not in worker.output()
    # and Celery's inspect sees the worker and its queue (the operator API's executor state)
    seen = {w.name: w.queues for w in celery_workers_seen(broker_url=broker, timeout=3)}
    assert [queue] in seen.values(), seen


def test_a_worker_killed_mid_task_leaves_it_final_and_the_redelivery_is_refused(
    airflow_sdk,  # noqa: F811
    start_celery_worker,
    dags_folder,
    broker,
    queue,
    tmp_path,
):
    # given a worker running a long task (its environment holding a database URL and secrets
    # it says it does not need)
    declare_dag(dags_folder, queue)
    (ti,) = scheduled_task_instances(DAG_ID, "sleepy", 1)
    first = start_celery_worker(
        "--concurrency",
        "1",
        extra={"DATABASE_URL": "postgres://nobody@127.0.0.1:1/none", "JWT_SECRET": "x" * 64},
    )
    assert "does not need" in first.output()
    task_instances_dispatch(send=sender(broker))
    wait_until(lambda: markers(tmp_path, "sleepy_start", ti), timeout=180, what="the task start")

    # when the worker is killed with SIGKILL, and another worker takes the queue
    first.process.send_signal(signal.SIGKILL)
    first.process.wait()
    second = start_celery_worker("--concurrency", "1")

    # then the task instance ends final, its one try having run once, and the broker's
    # redelivery of the unacknowledged workload is refused by the server and dropped
    wait_until(lambda: state(ti) == "success", timeout=180, what="the task to succeed")
    if broker.startswith("amqp"):  # Redis: later, when a restore gets to it (see below)
        wait_until(
            lambda: "dropped celery_worker_test.sleepy" in second.output(),
            timeout=120,
            what="the redelivered workload to be refused",
        )
    assert len(markers(tmp_path, "sleepy_start", ti)) == 1
    assert markers(tmp_path, "sleepy", ti)[0]["env"] == []  # the secrets stayed with the worker
    assert TaskInstance.objects.get(pk=ti.pk).try_number == 1


def test_a_workload_delivered_twice_runs_once(
    airflow_sdk,  # noqa: F811
    start_celery_worker,
    dags_folder,
    broker,
    queue,
    tmp_path,
):
    # given two workers on the queue (the two deliveries may reach one or both)
    declare_dag(dags_folder, queue)
    (ti,) = scheduled_task_instances(DAG_ID, "quick", 1)
    workers = [start_celery_worker("--concurrency", "1") for _ in range(2)]

    # when the same workload is sent twice
    send = sender(broker)

    def twice(batch: list[Sendable]) -> list[Any]:
        return send(batch + batch)

    task_instances_dispatch(send=twice)

    # then one try runs; the other delivery is dropped: refused by the server (409) on the
    # other worker, or seen running already on the same one
    def outputs() -> str:
        return "".join(worker.output() for worker in workers)

    wait_until(lambda: state(ti) == "success", timeout=180, what="the task to succeed")
    wait_until(
        lambda: "runtime.celery_worker: dropped celery_worker_test.quick" in outputs(),
        timeout=120,
        what="the duplicate to be dropped",
    )
    assert len(markers(tmp_path, "quick", ti)) == 1


CHAIN_DAG = """
from datetime import datetime

from airflow.sdk import dag, task


@dag(
    dag_id="celery_chain",
    schedule=None,
    start_date=datetime(2024, 1, 1),
    catchup=False,
    default_args={{"queue": "{queue}"}},
)
def celery_chain():
    @task
    def first():
        return 21

    @task
    def second(value):
        assert value == 21

    second(first())


celery_chain()
"""


def test_the_scheduler_sends_a_triggered_runs_tasks_to_the_celery_worker(
    airflow_sdk,  # noqa: F811
    server,
    start_celery_worker,
    dags_folder,
    broker,
    queue,
    settings,
    tmp_path,
):
    # given a DAG file whose tasks take the test's queue from default_args, loaded by the
    # DAG processor's parser, and a scheduler with EXECUTOR=celery
    (dags_folder / "chain.py").write_text(CHAIN_DAG.format(queue=queue))
    dags_folder_load(dags_folder, settings=settings, parser_home=tmp_path / "parser_home")
    assert set(DagTask.objects.filter(dag_id="celery_chain").values_list("queue", flat=True)) == {
        queue
    }
    Dag.objects.filter(dag_id="celery_chain").update(is_paused=False)
    worker = start_celery_worker("--concurrency", "2")
    out_path = tmp_path / "scheduler.out"
    with out_path.open("w") as out:
        scheduler = subprocess.Popen(
            [sys.executable, "manage.py", "scheduler", "--interval", "0.3"],
            cwd=REPO,
            env=server_env(EXECUTOR="celery", CELERY_BROKER_URL=broker),
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
        )
    try:
        # when a run is triggered
        run = dag_run_trigger(dag_id="celery_chain")

        # then the scheduler sends each task instance as it becomes runnable, and the run
        # succeeds
        wait_until(
            lambda: DagRun.objects.get(pk=run.pk).state in ("success", "failed"),
            timeout=240,
            what=f"the run to end\n{out_path.read_text()}\n{worker.output()}",
        )
        assert DagRun.objects.get(pk=run.pk).state == "success", worker.output()
        log = out_path.read_text()
        assert "executor celery" in log
        assert f"sent celery_chain.first @ {run.run_id} try 1 to Celery queue {queue}" in log
        assert f"sent celery_chain.second @ {run.run_id} try 1 to Celery queue {queue}" in log
    finally:
        scheduler.send_signal(signal.SIGTERM)
        try:
            scheduler.wait(timeout=30)
        except subprocess.TimeoutExpired:
            scheduler.kill()
            scheduler.wait()


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[Callable[[], None]]:
    """A Redis of the test's own (appendonly, so a restart keeps its messages) on a free port;
    yields ``restart()``: SIGKILL it and start it again on the same port and data."""
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    data = tmp_path / "redis"
    data.mkdir()
    processes: list[subprocess.Popen[bytes]] = []

    def start() -> None:
        process = subprocess.Popen(
            [
                *("redis-server", "--port", str(port), "--bind", "127.0.0.1"),
                *("--dir", str(data), "--appendonly", "yes", "--appendfsync", "always"),
                *("--save", ""),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        processes.append(process)
        wait_until(lambda: _reachable(f"redis://127.0.0.1:{port}/0"), timeout=30, what="redis")

    def restart() -> None:
        processes[-1].kill()
        processes[-1].wait()
        start()

    start()
    restart.url = f"redis://127.0.0.1:{port}/0"  # type: ignore[attr-defined]
    yield restart
    for process in processes:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_a_broker_restart_mid_run_loses_nothing_and_runs_nothing_twice(
    airflow_sdk,  # noqa: F811
    server,
    private_redis,
    dags_folder,
    tmp_path,
):
    # given a worker on a Redis of the test's own, running a long task
    url = private_redis.url
    queue = "restart"
    declare_dag(dags_folder, queue)
    (sleepy,) = scheduled_task_instances(DAG_ID, "sleepy", 1)
    worker = launch_worker(
        "--concurrency",
        "2",
        server_url=server.url,
        tmp_path=tmp_path,
        dags_folder=dags_folder,
        broker=url,
        queue=queue,
    )
    try:
        task_instances_dispatch(send=sender(url))
        wait_until(lambda: markers(tmp_path, "sleepy_start", sleepy), timeout=180, what="start")

        # when the broker is killed and started again mid-task, and another task is sent
        private_redis()
        (quick,) = scheduled_task_instances(DAG_ID, "quick", 1)
        wait_until(
            lambda: bool(task_instances_dispatch(send=sender(url)).sent),
            timeout=60,
            what="the broker to take the second task",
        )

        # then both end in success, each having run once, the worker having reconnected
        for ti in (sleepy, quick):
            wait_until(lambda ti=ti: state(ti) == "success", timeout=180, what=f"{ti}")
        assert len(markers(tmp_path, "sleepy_start", sleepy)) == 1
        assert len(markers(tmp_path, "quick", quick)) == 1
    finally:
        stop(worker)


def descendants(pid: int) -> list[int]:
    """``pid``'s live descendants, read from ``/proc`` (their parent ids)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def test_a_worker_machine_dying_mid_task_leaves_it_to_the_heartbeat_timeout(
    airflow_sdk,  # noqa: F811
    start_celery_worker,
    dags_folder,
    broker,
    queue,
    settings,
    tmp_path,
):
    # given a worker running a long task
    declare_dag(dags_folder, queue)
    (ti,) = scheduled_task_instances(DAG_ID, "sleepy", 1)
    worker = start_celery_worker("--concurrency", "1", extra={"CELERY_TEST_SLEEP": "60"})
    task_instances_dispatch(send=sender(broker))
    wait_until(lambda: markers(tmp_path, "sleepy_start", ti), timeout=180, what="the task start")
    wait_until(lambda: state(ti) == "running", timeout=30, what="the task running")

    # when the worker and every process of its task die at once (the machine is gone), and
    # another worker takes the queue
    tree = [worker.process.pid, *descendants(worker.process.pid)]
    for pid in tree:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    worker.process.wait()
    second = start_celery_worker("--concurrency", "1")

    # then the scheduler's heartbeat timeout ends the task instance (no tries left: failed),
    # and the workload the broker hands the other worker is refused: it never ran again
    settings.TASK_INSTANCE_HEARTBEAT_TIMEOUT = 3.0

    def reaped() -> bool:
        upkeep_pass()
        return state(ti) == "failed"

    wait_until(reaped, timeout=60, what="the heartbeat timeout to fail it")
    assert "heartbeat" in (TaskInstance.objects.get(pk=ti.pk).failure_reason or "")
    if broker.startswith("amqp"):
        # RabbitMQ redelivers as soon as the connection is gone; Redis after the visibility
        # timeout, when a worker's restore (every 100 s, under a lock a killed worker may
        # hold for up to 5 min) gets to it: whenever it comes, it is refused the same way
        wait_until(
            lambda: "runtime.celery_worker: dropped celery_worker_test.sleepy" in second.output(),
            timeout=60,
            what="the redelivered workload to be refused",
        )
    assert len(markers(tmp_path, "sleepy_start", ti)) == 1
