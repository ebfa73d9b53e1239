"""``EXECUTOR=celery``'s dispatch (the scheduler's side) and the Celery worker's settings,
without a broker or a process: what is sent (Airflow's ``ExecuteTask`` on the task's queue,
a token for that task instance only), after the commit; what the broker does not take goes
back to ``scheduled``; a task with no DAG file fails with its reason; a worker's environment
missing a setting, or holding a bad one, is refused with a message naming it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from assets_app.models import TaskInstance
from assets_app.tokens import token_decode
from runtime.celery_dispatch import Sendable, task_instances_dispatch
from runtime.celery_worker import (
    ConfigError,
    WorkerConfig,
    WorkloadError,
    WorkloadRunner,
    workload_parse,
)
from tests.live_server import REPO
from tests.runtime.worker.conftest import declare, scheduled_task_instances

HERE = Path(__file__).resolve().parent


def declare_file_dag(folder: Path, *, queue: str | None = None) -> None:
    folder.mkdir(exist_ok=True)
    sub = folder / "team"
    sub.mkdir(exist_ok=True)
    (sub / "pipeline.py").write_text("# a DAG file\n")
    task: dict[str, Any] = {"task_id": "load"}
    if queue is not None:
        task["queue"] = queue
    declare(
        [
            {
                "dag_id": "celery_dispatch",
                "airflow_dag_file": "team/pipeline.py",
                "airflow_dags_folder": ".",
                "tasks": [task],
            }
        ],
        base_dir=folder,
    )


@pytest.mark.django_db(transaction=True)
def test_each_task_instance_is_sent_after_the_commit_as_execute_task_on_its_queue(tmp_path):
    # given two scheduled task instances of a DAG file's task on queue "gpu"
    declare_file_dag(tmp_path / "dags", queue="gpu")
    tis = scheduled_task_instances("celery_dispatch", "load", 2)
    batches: list[list[Sendable]] = []

    def send(batch: list[Sendable]) -> list[Any]:
        # after the commit: the task instances are queued for everyone
        assert set(TaskInstance.objects.values_list("state", flat=True)) == {"queued"}
        batches.append(batch)
        return []

    # when the scheduler's dispatch runs
    result = task_instances_dispatch(send=send)

    # then one batch went, each workload Airflow's ExecuteTask for its task instance on its
    # task's queue, with a token for that task instance only and the file's path in the folder
    (batch,) = batches
    assert {str(item.task_instance_id) for item in batch} == {str(ti.pk) for ti in tis}
    assert result.sent == batch
    for item in batch:
        assert item.queue == "gpu"
        workload = json.loads(item.text)
        assert workload["type"] == "ExecuteTask"
        assert workload["dag_rel_path"] == "team/pipeline.py"
        assert workload["bundle_info"] == {"name": "dags-folder"}
        assert workload["ti"]["queue"] == "gpu"
        assert workload["ti"]["id"] == str(item.task_instance_id)
        assert token_decode(workload["token"]).subject == str(item.task_instance_id)
        assert workload_parse(item.text).ti_id == str(item.task_instance_id)
    # and nothing is left to send
    assert task_instances_dispatch(send=send).sent == []


@pytest.mark.django_db(transaction=True)
def test_what_the_broker_does_not_take_goes_back_to_scheduled(tmp_path):
    declare_file_dag(tmp_path / "dags")
    (ti,) = scheduled_task_instances("celery_dispatch", "load", 1)

    result = task_instances_dispatch(send=lambda batch: [item.task_instance_id for item in batch])

    assert result.sent == []
    assert result.given_back == 1
    assert TaskInstance.objects.get(pk=ti.pk).state == "scheduled"


@pytest.mark.django_db(transaction=True)
def test_a_task_with_no_dag_file_fails_with_its_reason():
    declare([{"dag_id": "celery_callable", "tasks": [{"task_id": "work"}]}], base_dir=HERE)
    (ti,) = scheduled_task_instances("celery_callable", "work", 1)

    result = task_instances_dispatch(send=lambda batch: pytest.fail("nothing to send"))

    assert result.sent == []
    failed = TaskInstance.objects.get(pk=ti.pk)
    assert failed.state == "failed"
    assert "EXECUTOR=celery runs the tasks of DAG files" in failed.failure_reason
    assert len(result.failed) == 1


def test_a_worker_environment_missing_a_setting_is_refused_naming_it(tmp_path):
    with pytest.raises(ConfigError, match="set EXECUTION_API_URL, AIRFLOW__CORE__DAGS_FOLDER"):
        WorkerConfig.from_env({"CELERY_BROKER_URL": "redis://127.0.0.1:6379/0"})
    good = {
        "CELERY_BROKER_URL": "redis://127.0.0.1:6379/0",
        "EXECUTION_API_URL": "http://server:8000/execution/",
        "AIRFLOW__CORE__DAGS_FOLDER": str(tmp_path),
    }
    config = WorkerConfig.from_env(good)
    assert config.server == "http://server:8000"
    for name, value, message in (
        ("CELERY_BROKER_URL", "kafka://x", "amqp:// or redis://"),
        ("EXECUTION_API_URL", "server:8000", "http"),
        ("AIRFLOW__CORE__DAGS_FOLDER", str(tmp_path / "none"), "not a folder"),
        ("WORKER_WARM", "maybe", "true or false"),
        ("CELERY_VISIBILITY_TIMEOUT", "soon", "whole number"),
    ):
        with pytest.raises(ConfigError, match=message):
            WorkerConfig.from_env({**good, name: value})


@pytest.mark.parametrize(
    ("message", "error"),
    [
        (b"{}", "JSON string"),
        ("not json", "not JSON"),
        (json.dumps({"type": "RunTrigger"}), "ExecuteTask"),
        (json.dumps({"type": "ExecuteTask", "ti": {}, "token": ""}), "no token"),
        (
            json.dumps({"type": "ExecuteTask", "ti": {}, "token": "t", "dag_rel_path": "../x.py"}),
            "inside the DAG folder",
        ),
        (
            json.dumps({"type": "ExecuteTask", "ti": {}, "token": "t", "dag_rel_path": "x.py"}),
            "lacks",
        ),
    ],
)
def test_a_message_that_is_not_a_workload_is_refused_with_why(message, error):
    with pytest.raises(WorkloadError, match=error):
        workload_parse(message)


#: What reads settings, a database or a secret: none of it is imported by the worker (kombu
#: imports ``django.utils.functional`` when Django is installed, which reads nothing).
NOT_IMPORTED = ("django.conf", "django.db", "assets_app", "config", "jwt")
PROBE = (
    "import sys, runtime.celery_worker\n"
    "print(sorted(m for m in sys.modules if m.startswith({names!r})))"
)


@pytest.mark.slow
def test_the_worker_module_reads_no_settings_database_or_secret():
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(names=NOT_IMPORTED)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)},
        timeout=120,
    )
    assert out.stdout.strip() == "[]"


def test_a_workload_that_cannot_start_is_reported_and_left_queued(tmp_path):
    # given a worker whose log folder cannot be made (a file is in the way)
    blocked = tmp_path / "logs"
    blocked.write_text("a file")
    config = WorkerConfig(
        broker_url="redis://127.0.0.1:6379/0",
        server="http://127.0.0.1:8000",
        dags_folder=tmp_path,
        log_dir=blocked,
        airflow_home=tmp_path / "home",
        warm=False,
    )
    runner = WorkloadRunner(config=config, base_env={"JWT_SECRET": "x", "PATH": "/bin"})
    workload = {
        "type": "ExecuteTask",
        "token": "t",
        "dag_rel_path": "a.py",
        "ti": {"id": "1", "dag_id": "d", "run_id": "r", "task_id": "t", "try_number": 1},
    }

    # then it says so, runs nothing, and keeps the secret out of the tasks' environment
    assert runner.run(json.dumps(workload)).startswith("could not start d.t @ r try 1")
    assert "JWT_SECRET" not in runner._task_env
    runner.close()
