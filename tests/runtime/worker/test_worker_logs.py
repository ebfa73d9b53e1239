"""End to end: ``manage.py worker`` ships each try's log to a live server while the try runs.

A real worker runs a task that prints a line (and a connection's password), then waits for a
file: the line is readable, masked, through the admin's JSON endpoint and through Airflow's
own client (``TaskInstanceApi.get_log``) while the task runs, and all of it once it ended. A
task that prints 50 MB is capped with the marker line while the server's gunicorn workers
stay within a few megabytes of their peak memory before.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import httpx
import pytest
from airflow_client.client.api.task_instance_api import TaskInstanceApi
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from assets_app.models import TaskInstance, TaskLog
from assets_app.services.secrets.connections import ConnectionFields, connection_create
from assets_app.services.secrets.variables import variable_set
from tests.executionapi.conftest import airflow_sdk  # noqa: F401 (a fixture)
from tests.executionapi.test_real_worker import DAGS_DIR
from tests.live_server import serve
from tests.publicapi.test_airflow_client import api_client, login
from tests.runtime.worker.conftest import declare, scheduled_task_instances, wait_until

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
TASKS = HERE / "log_tasks.py"
PASSWORD = "log-e2e-pass-93Xk"


@pytest.fixture
def server(transactional_db, tmp_path):
    """A live server of one gunicorn worker (whose memory the second test measures)."""
    yield from serve(tmp_path, workers=1, threads=4)


def events(response) -> list[str]:
    return [message.event for message in response.content.actual_instance]


def admin_log(client: Client, ti: TaskInstance) -> dict:
    url = reverse("admin:assets_app_taskinstance_log", args=[ti.pk, ti.try_number])
    response = client.get(url)
    assert response.status_code == 200, response.content
    return response.json()


def test_a_running_tasks_log_is_read_through_the_admin_and_airflows_client(
    start_worker, server, marker_dir
):
    # given a connection whose password the task prints, and a runnable task instance
    connection_create(
        conn_id="warehouse", values=ConnectionFields(conn_type="postgres", password=PASSWORD)
    )
    declare(
        [{"dag_id": "logs", "tasks": [{"task_id": "talk", "callable": f"{TASKS}:print_then_wait"}]}]
    )
    (ti,) = scheduled_task_instances("logs", "talk", 1)
    User.objects.create_superuser("ops", "ops@example.com", "s3cret")
    admin = Client()
    admin.login(username="ops", password="s3cret")
    logs = TaskInstanceApi(api_client(server.url, login(server.url, "ops", "s3cret")))

    # when a worker runs it
    worker = start_worker("--once", env={"LOG_TEST_SECRET": PASSWORD})

    # then while it waits, its first lines are on the admin page's endpoint and in get_log
    wait_until(
        lambda: "first line" in admin_log(admin, ti)["text"], timeout=60, what="the first line"
    )
    running = admin_log(admin, ti)
    assert f"first line of {ti.pk}\n" in running["text"]
    assert "connecting with password ***" in running["text"]
    assert running["complete"] is False
    live = logs.get_log("logs", ti.run_id, "talk", 1)
    assert f"first line of {ti.pk}" in "\n".join(events(live))
    assert live.continuation_token is not None
    page = admin.get(reverse("admin:assets_app_taskinstance_change", args=[ti.pk]))
    assert f"first line of {ti.pk}" in page.content.decode()

    # and once it is let go and has ended, all of it, with no token left
    (marker_dir / f"{ti.pk}.go").touch()
    assert worker.wait(timeout=120) == 0, worker.output()
    ti.refresh_from_db()
    assert ti.state == "success", worker.output()
    ended = logs.get_log("logs", ti.run_id, "talk", 1)
    lines = "\n".join(events(ended))
    assert f"first line of {ti.pk}" in lines
    assert "last line" in lines
    assert ended.continuation_token is None
    following = logs.get_log("logs", ti.run_id, "talk", 1, token=live.continuation_token)
    assert "last line" in "\n".join(events(following))
    assert f"first line of {ti.pk}" not in "\n".join(events(following))
    final = admin_log(admin, ti)
    assert final["complete"] is True
    # the password is nowhere: not stored, not served, not in the worker's output
    stored = "".join(
        TaskLog.objects.get(task_instance_id=ti.pk).chunks.values_list("content", flat=True)
    )
    assert "connecting with password ***" in stored
    assert PASSWORD not in stored
    assert PASSWORD not in lines
    assert PASSWORD not in worker.output()


def test_an_airflow_dag_file_tasks_log_is_airflows_structured_messages_masked(
    airflow_sdk,  # noqa: F811
    start_worker,
    server,
    tmp_path,
):
    # given what the DAG file's task reads, and a runnable instance of it
    variable_set(key="greeting", value="hello")
    variable_set(key="config", value='{"rows": 3}')
    connection_create(
        conn_id="warehouse",
        values=ConnectionFields(conn_type="postgres", host="db.internal", password=PASSWORD),
    )
    declare(
        [
            {
                "dag_id": "registry_secrets",
                "airflow_dag_file": "registry_secrets_dag.py",
                "tasks": [{"task_id": "use_secrets"}],
            }
        ],
        base_dir=DAGS_DIR,
    )
    (ti,) = scheduled_task_instances("registry_secrets", "use_secrets", 1)
    User.objects.create_superuser("ops", "ops@example.com", "s3cret")

    # when a worker runs it under Airflow's own worker
    worker = start_worker(
        "--once",
        env={
            "AIRFLOW_HOME": str(tmp_path / "airflow_home"),
            "AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": "1",
        },
    )
    assert worker.wait(timeout=240) == 0, worker.output()

    # then Airflow's client reads Airflow's JSON lines as its structured messages, the
    # password masked (by Airflow's SDK, and by the server on the way in)
    ti.refresh_from_db()
    assert ti.state == "success", worker.output()
    logs = TaskInstanceApi(api_client(server.url, login(server.url, "ops", "s3cret")))
    response = logs.get_log("registry_secrets", ti.run_id, "use_secrets", 1)
    messages = [m.to_dict() for m in response.content.actual_instance]
    said = [m for m in messages if m["event"] == "the connection's password is ***"]
    assert len(said) == 1, messages
    assert isinstance(said[0]["timestamp"], datetime)  # parsed as Airflow's message
    raw = httpx.get(
        f"{server.url}/api/v2/dags/registry_secrets/dagRuns/{ti.run_id}/taskInstances/"
        "use_secrets/logs/1",
        headers={"Authorization": f"Bearer {login(server.url, 'ops', 's3cret')}"},
    ).json()
    [line] = [m for m in raw["content"] if m["event"] == "the connection's password is ***"]
    assert line["level"] == "info"  # the JSON line as Airflow's SDK wrote it
    assert line["logger"].endswith("registry_secrets_dag")
    assert response.continuation_token is None
    stored = "".join(
        TaskLog.objects.get(task_instance_id=ti.pk).chunks.values_list("content", flat=True)
    )
    assert PASSWORD not in stored


def _worker_pids(master: int) -> list[int]:
    """The gunicorn master's children (its workers)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == master:
            pids.append(int(entry.name))
    return pids


def _peak_rss_kib(pid: int) -> int:
    """The process's peak resident memory so far (``VmHWM``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmHWM for {pid}")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc")
def test_a_fifty_megabyte_log_is_capped_and_the_server_memory_stays_bounded(
    start_worker, server, marker_dir, tmp_path
):
    # given the server's one worker process, warmed up by a first task's log (and a read of
    # it), and its peak memory so far
    _warm_up(start_worker, server, marker_dir)
    (pid,) = _worker_pids(server.process.pid)
    before = _peak_rss_kib(pid)
    declare(
        [
            {
                "dag_id": "big",
                "tasks": [{"task_id": "flood", "callable": f"{TASKS}:print_fifty_megabytes"}],
            }
        ]
    )
    (ti,) = scheduled_task_instances("big", "flood", 1)

    # when a worker runs a task that prints 50 MB, and the log is read through /api/v2
    worker = start_worker("--once")
    assert worker.wait(timeout=300) == 0, worker.output()
    shipped = _peak_rss_kib(pid)
    read = _read_log(server, "big", ti.run_id, "flood")
    after = _peak_rss_kib(pid)

    # then the try's log is TASK_LOG_MAX_BYTES (5 MiB) and the marker, the shipper read on
    # to the end without sending the rest, and the server's peak memory grew by a few chunks'
    # worth (a 256 KiB chunk is copied a few times as it is parsed, masked and stored; measured
    # ~8 MiB while taking the log, ~3 MiB while reading it): far less than the 50 MB log, and
    # than the capped log held whole (its 5 MiB text, its lines and their JSON: 15 MiB or more)
    ti.refresh_from_db()
    assert ti.state == "success", worker.output()
    log = TaskLog.objects.get(task_instance_id=ti.pk)
    assert (log.truncated, log.closed) == (True, True)
    assert log.received_bytes < 6 * 1024 * 1024  # the rest was skipped, not sent
    marker = (
        "*** Log truncated: this try's log reached TASK_LOG_MAX_BYTES (5242880 bytes); "
        "the rest of its output was not kept ***"
    )
    assert log.chunks.order_by("-seq").values_list("content", flat=True)[0].endswith(marker + "\n")
    assert 5 * 1024 * 1024 - 2048 <= log.stored_bytes <= 5 * 1024 * 1024 + len(marker) + 1
    assert read[-1] == {"event": marker}
    assert len(read) > 4500  # lines of 1 KiB and the prefix the supervisor logs them with
    log_file = next((tmp_path / "task_logs").rglob("big/*/flood/attempt=1.log"))
    assert log_file.stat().st_size > 50 * 1024 * 1024
    peaks = f"peak RSS {before} KiB, {shipped} KiB once shipped, {after} KiB once read"
    assert shipped - before < 16 * 1024, peaks
    assert after - shipped < 8 * 1024, peaks


def _warm_up(start_worker, server, marker_dir: Path) -> None:
    """A first task's log shipped and read: the server's code paths loaded and used."""
    declare(
        [{"dag_id": "warm", "tasks": [{"task_id": "up", "callable": f"{TASKS}:print_then_wait"}]}]
    )
    (ti,) = scheduled_task_instances("warm", "up", 1)
    (marker_dir / f"{ti.pk}.go").touch()  # no waiting
    worker = start_worker("--once", env={"LOG_TEST_SECRET": "nothing-secret"})
    assert worker.wait(timeout=120) == 0, worker.output()
    assert any("last line" in e["event"] for e in _read_log(server, "warm", ti.run_id, "up"))


def _read_log(server, dag_id: str, run_id: str, task_id: str) -> list[dict]:
    """Try 1's log through Airflow's client, as plain messages."""
    if not User.objects.filter(username="ops").exists():
        User.objects.create_superuser("ops", "ops@example.com", "s3cret")
    logs = TaskInstanceApi(api_client(server.url, login(server.url, "ops", "s3cret")))
    response = logs.get_log(dag_id, run_id, task_id, 1)
    return [m.to_dict() for m in response.content.actual_instance]
