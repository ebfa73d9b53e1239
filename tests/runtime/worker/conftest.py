"""Helpers of the worker tests: declare DAGs whose tasks name their code, make scheduled task
instances, and run ``manage.py worker`` as a real subprocess against a live server."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.core.management import call_command

from assets_app.models import DagRun, DagRunState, TaskInstance, TaskInstanceState
from assets_app.services.dags.declare import dags_declare
from assets_app.services.dags.manifest import manifest_parse
from tests.live_server import REPO, server_env

HERE = Path(__file__).resolve().parent
TASKS = HERE / "worker_tasks.py"


def declare(dags: list[dict[str, Any]], *, base_dir: Path = HERE) -> None:
    manifest = manifest_parse(yaml.safe_load(yaml.safe_dump({"dags": dags})), base_dir=base_dir)
    dags_declare(manifest=manifest, fileloc=str(base_dir / "worker_tests.yaml"))


def dags_folder_load(folder: Path, *, settings: Any, parser_home: Path) -> str:
    """``manage.py declare_dags --dags-folder folder`` with this interpreter as the DAG parser
    (``parser_home`` its Airflow home); the command's output."""
    settings.DAG_PARSER_HOME = parser_home
    settings.DAG_PARSER_PYTHON = sys.executable
    out = StringIO()
    call_command("declare_dags", "--dags-folder", str(folder), stdout=out)
    return out.getvalue()


def scheduled_task_instances(dag_id: str, task_id: str, count: int) -> list[TaskInstance]:
    """``count`` runs of the DAG, each with one scheduled task instance (as the scheduler
    makes them)."""
    tis = []
    for n in range(count):
        run = DagRun.objects.create(
            dag_id=dag_id, run_id=f"manual__{task_id}_{n}", state=DagRunState.QUEUED
        )
        tis.append(
            TaskInstance.objects.create(
                dag_run=run,
                dag_id=dag_id,
                run_id=run.run_id,
                task_id=task_id,
                state=TaskInstanceState.SCHEDULED,
            )
        )
    return tis


def states(tis: list[TaskInstance]) -> list[str | None]:
    """The task instances' states now, found by run (a retry gives a task instance a new id)."""
    by_run = dict(
        TaskInstance.objects.filter(dag_run__in=[t.dag_run_id for t in tis]).values_list(
            "dag_run_id", "state"
        )
    )
    return [by_run[t.dag_run_id] for t in tis]


def run_states(tis: list[TaskInstance]) -> list[str]:
    by_id = dict(
        DagRun.objects.filter(pk__in=[t.dag_run_id for t in tis]).values_list("pk", "state")
    )
    return [by_id[t.dag_run_id] for t in tis]


@dataclass
class WorkerProcess:
    process: subprocess.Popen[str]
    out_path: Path

    def output(self) -> str:
        return self.out_path.read_text(errors="replace")

    def wait(self, timeout: float = 120) -> int:
        return self.process.wait(timeout=timeout)

    def signal(self, sig: signal.Signals) -> None:
        self.process.send_signal(sig)


@pytest.fixture
def marker_dir(tmp_path: Path) -> Path:
    out = tmp_path / "markers"
    out.mkdir()
    return out


@pytest.fixture
def start_worker(
    server: Any, tmp_path: Path, marker_dir: Path
) -> Iterator[Callable[..., WorkerProcess]]:
    """Start ``manage.py worker --server <live server> ARGS`` as a subprocess."""
    started: list[WorkerProcess] = []

    def start(*args: str, env: dict[str, str] | None = None) -> WorkerProcess:
        out_path = tmp_path / f"worker-{len(started)}.out"
        with out_path.open("w") as out:
            process = subprocess.Popen(
                [
                    *(sys.executable, "manage.py", "worker", "--server", server.url),
                    *("--log-dir", str(tmp_path / "task_logs"), "--poll-interval", "0.2"),
                    *args,
                ],
                cwd=REPO,
                env=server_env(WORKER_TEST_OUT=str(marker_dir), **(env or {})),
                stdout=out,
                stderr=subprocess.STDOUT,
                text=True,
            )
        worker = WorkerProcess(process, out_path)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        if worker.process.poll() is None:
            worker.process.kill()
            worker.process.wait()


def wait_until(condition: Callable[[], bool], *, timeout: float = 60, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or condition}")
        time.sleep(0.1)
