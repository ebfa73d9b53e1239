"""A 15-s PostgreSQL outage in the middle of 800 success reports (issue 41, item 6): real
gunicorn processes, the task SDK's client, and a PostgreSQL cluster of the test's own (stopped
and started again; never the shared one). No report answers 500, none is lost, none is
recorded twice, no task instance is left running."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from django.db import connection

from devtools.processes import free_port, process_stop, server_start
from task_sdk.client import Client, ServerResponseError
from task_sdk.timestamps import now
from tests.live_server import REPO, SERVER_START_TIMEOUT, server_env

pytestmark = pytest.mark.slow

REPORTS = 800
OUTAGE_SECONDS = 15
ASSET = {"name": "outage_ledger", "uri": "s3://bucket/outage-ledger", "type": "Asset"}

SETUP = """
import json
from django.core.management import call_command
from assets_app.services.runs.dag_runs import task_instance_create, task_instance_token_issue
call_command("declare_dags", "{manifest}")
for index in range({reports}):
    ti = task_instance_create(
        dag_id="ledger_reports", task_id=f"report_{{index:03d}}",
        run_id="manual__2026-12-04T21:00:00+00:00", map_index=-1, state="running",
        max_tries=None,
    ).task_instance
    token = task_instance_token_issue(task_instance_id=ti.pk, ttl_seconds=3600)
    print(json.dumps([str(ti.pk), token]))
"""

CHECK = """
import json
from django.db.models import Count
from assets_app.models import AssetEvent, TaskInstance
states = dict(TaskInstance.objects.values_list("state").annotate(n=Count("id")))
events = AssetEvent.objects.count()
tasks = AssetEvent.objects.values("source_task_id").distinct().count()
print(json.dumps({"states": states, "events": events, "tasks": tasks}))
"""


def _bin(name: str) -> str:
    found = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"))
    return str(found[-1]) if found else (shutil.which(name) or name)


def _as_postgres(*argv: str) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *argv] if os.geteuid() == 0 else list(argv)


@pytest.fixture
def cluster():
    """A PostgreSQL cluster of this test's own, on a free port: yields (port, stop, start)."""
    if connection.vendor != "postgresql":
        pytest.skip("runs in the PostgreSQL lane (set DATABASE_URL=postgres://...)")
    if not Path(_bin("initdb")).exists() or (os.geteuid() == 0 and not shutil.which("runuser")):
        pytest.skip("needs PostgreSQL's initdb and pg_ctl")
    # outside pytest's tmp_path, whose folders only root may enter
    home = Path(tempfile.mkdtemp(prefix="outage-pg-"))
    data = home / "pgdata"
    data.mkdir()
    if os.geteuid() == 0:
        shutil.chown(home, "postgres")
        shutil.chown(data, "postgres")
    subprocess.run(
        _as_postgres(_bin("initdb"), "-D", str(data), "-A", "trust", "-U", "postgres"),
        check=True,
        capture_output=True,
    )
    port = free_port()
    options = f"-p {port} -k {data} -c listen_addresses=127.0.0.1 -c fsync=off"

    def start() -> None:
        # the server's output to a file: it outlives pg_ctl and would hold a pipe open
        logfile = str(home / "postgres.log")
        subprocess.run(
            _as_postgres(
                _bin("pg_ctl"), "-D", str(data), "-o", options, "-l", logfile, "-w", "start"
            ),
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=60,
        )

    def stop() -> None:
        subprocess.run(
            _as_postgres(_bin("pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"),
            check=False,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=60,
        )

    start()
    try:
        yield port, stop, start
    finally:
        stop()
        shutil.rmtree(home, ignore_errors=True)


def _manage(env: dict[str, str], code: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code],
        cwd=REPO,
        env=env,
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_800_success_reports_survive_a_15_second_postgresql_outage(cluster, tmp_path):
    port, stop, start = cluster
    subprocess.run(
        ["psql", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-c", "CREATE DATABASE r"],
        check=True,
        capture_output=True,
    )
    env = server_env(DATABASE_URL=f"postgres://postgres@127.0.0.1:{port}/r")
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--no-input", "-v", "0"],
        cwd=REPO,
        env=env,
        check=True,
        timeout=600,
    )
    manifest = tmp_path / "ledger.yaml"
    outlet = {"asset": {"name": ASSET["name"], "uri": ASSET["uri"]}}
    tasks = [{"task_id": f"report_{i:03d}", "outlets": [outlet]} for i in range(REPORTS)]
    manifest.write_text(json.dumps({"dags": [{"dag_id": "ledger_reports", "tasks": tasks}]}))
    tokens = [
        json.loads(line)
        for line in _manage(env, SETUP.format(manifest=manifest, reports=REPORTS)).splitlines()
        if line.startswith("[")
    ]
    assert len(tokens) == REPORTS
    log = tmp_path / "server.log"
    with log.open("wb") as out:
        server, url = server_start(env=env, stdout=out, timeout=SERVER_START_TIMEOUT)
    failures: list[str] = []
    finished: list[float] = []

    def report(item: list[str]) -> None:
        ti_id, token = item
        try:
            with Client(url, token, timeout=60) as client:
                client.succeed(ti_id, now(), [ASSET], [])
            finished.append(time.monotonic())
        except ServerResponseError as exc:
            failures.append(f"{exc.status_code}: {exc}")
        except Exception as exc:  # every failure is counted, whatever it is
            failures.append(repr(exc))

    try:
        with ThreadPoolExecutor(max_workers=16) as pool:
            done = pool.map(report, tokens)
            time.sleep(1.0)  # reports are flowing
            stop()
            restarted = time.monotonic() + OUTAGE_SECONDS
            time.sleep(OUTAGE_SECONDS)
            start()
            list(done)
    finally:
        process_stop(server)

    result = json.loads(_manage(env, CHECK).strip().splitlines()[-1])
    server_log = log.read_text(errors="replace")
    assert failures == [], failures[:5]
    assert result["states"] == {"success": REPORTS}, result
    assert result["events"] == REPORTS  # none lost, none twice
    assert result["tasks"] == REPORTS
    assert "Internal Server Error" not in server_log
    # the outage was met and ridden out: reports waited through it, the server said so
    assert sum(1 for at in finished if at >= restarted) > 16
    assert "went through on attempt" in server_log
