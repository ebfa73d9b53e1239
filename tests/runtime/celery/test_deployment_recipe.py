"""docs/deployment.md's recipe for a worker machine, run as written: two workers, each from
an environment of its own (``env -i``: nothing of this test's environment reaches them) and
taking a queue of its own, run a DAG file's tasks, each task on the worker of its queue."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from runtime.celery_app import celery_app
from runtime.celery_dispatch import CelerySender, task_instances_dispatch
from tests.docs.examples import doc_example
from tests.executionapi.conftest import airflow_sdk  # noqa: F401 (a fixture)
from tests.live_server import REPO
from tests.runtime.celery.test_celery_worker import (  # noqa: F401 (fixtures)
    DAG_ID,
    VISIBILITY,
    broker,
    dags_folder,
    state,
)
from tests.runtime.worker.conftest import declare, scheduled_task_instances, wait_until

# a Celery deployment's server is PostgreSQL's (docs/deployment.md); its tests are of brokers
# and workers, run once, in the PostgreSQL lane
pytestmark = [pytest.mark.slow, pytest.mark.postgres]


def recipe() -> str:
    """docs/deployment.md's block ``<!-- example: celery-worker-machine -->``."""
    return doc_example("celery-worker-machine")


def test_two_worker_machines_from_the_docs_recipe_each_run_their_queues_tasks(
    airflow_sdk,  # noqa: F811
    server,
    broker,  # noqa: F811
    dags_folder,  # noqa: F811
    tmp_path,
):
    # given a DAG file with one task on each of two queues
    queues = [f"recipe_{uuid.uuid4().hex[:8]}_{n}" for n in (1, 2)]
    declare(
        [
            {
                "dag_id": DAG_ID,
                "airflow_dag_file": "celery_dag.py",
                "tasks": [
                    {"task_id": "quick", "queue": queues[0]},
                    {"task_id": "sleepy", "queue": queues[1]},
                ],
            }
        ],
        base_dir=dags_folder,
    )
    (quick,) = scheduled_task_instances(DAG_ID, "quick", 1)
    (sleepy,) = scheduled_task_instances(DAG_ID, "sleepy", 1)

    # when two "machines" run the recipe, each with its queue, log folder and Python
    workers = []
    for n, queue in enumerate(queues):
        out_path = tmp_path / f"machine-{n}.out"
        env = {
            "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
            "HOME": str(tmp_path),
            "CELERY_BROKER_URL": broker,
            "EXECUTION_API_URL": server.url,
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags_folder),
            "WORKER_LOG_DIR": str(tmp_path / f"machine-{n}-logs"),
            "QUEUES": queue,
            # what the test's own process holds must not reach the worker
            "DATABASE_URL": os.environ.get("DATABASE_URL", "sqlite:///x"),
            "JWT_SECRET": "s" * 64,
        }
        with out_path.open("w") as out:
            process = subprocess.Popen(
                ["bash", "-c", f"exec {recipe().strip()}"],
                cwd=REPO,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,
            )
        workers.append((process, out_path))
    try:
        for _, out_path in workers:
            wait_until(
                lambda out_path=out_path: "ready." in out_path.read_text(),
                timeout=60,
                what="a worker to be ready",
            )
        task_instances_dispatch(send=CelerySender(broker_url=broker, visibility_timeout=VISIBILITY))

        # then each task succeeds, run by the worker of its queue, whose environment held
        # nothing the recipe did not give it
        for ti in (quick, sleepy):
            wait_until(lambda ti=ti: state(ti) == "success", timeout=180, what=f"{ti}")
        outputs = [out_path.read_text() for _, out_path in workers]
        assert "started celery_worker_test.quick" in outputs[0]
        assert "started celery_worker_test.sleepy" not in outputs[0]
        assert "started celery_worker_test.sleepy" in outputs[1]
        assert "started celery_worker_test.quick" not in outputs[1]
        assert all("does not need" not in output for output in outputs)
    finally:
        for process, _ in workers:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
        with celery_app(broker_url=broker).connection_for_write() as connection:
            for queue in queues:
                with contextlib.suppress(Exception):  # a queue never made
                    connection.default_channel.queue_delete(queue)
