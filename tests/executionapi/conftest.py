"""Fixtures of the execution API tests."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.utils import timezone
from rest_framework.test import APIClient

from assets_app.models import TaskInstance, TaskInstanceState
from assets_app.services.dags.declare import dags_declare
from assets_app.services.dags.manifest import manifest_parse
from assets_app.tokens import token_issue
from tests.factories import DagFactory, DagRunFactory, TaskInstanceFactory

WIRE_SAMPLES = Path(__file__).parent / "wire_samples"

#: The keys of an asset-event item (docs/api-execution.md), in the API and ``asset_events --json``.
ASSET_EVENT_ITEM_KEYS = {
    "id",
    "timestamp",
    "extra",
    "asset",
    "created_dagruns",
    "source_task_id",
    "source_dag_id",
    "source_run_id",
    "source_map_index",
    "partition_key",
}


def wire_sample(name: str) -> Any:
    """A body recorded from the real Airflow task SDK 1.3.2 (copied from shared/docs)."""
    return json.loads((WIRE_SAMPLES / f"{name}.json").read_text())


def state_url(ti: TaskInstance | str) -> str:
    return f"/execution/task-instances/{getattr(ti, 'pk', ti)}/state"


def airflow_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """A real Airflow worker's environment: a fresh AIRFLOW_HOME, no Django settings, fast
    heartbeats and retries."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "DJANGO"))}
    env.pop("DATABASE_URL", None)
    env.update(
        AIRFLOW_HOME=str(tmp_path / "airflow_home"),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        # heartbeat every second (default 5) so that a 1.5 s task heartbeats at least once and
        # the supervisor notices its child's exit sooner
        AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL="1",
        AIRFLOW__WORKERS__EXECUTION_API_RETRIES="2",
        AIRFLOW__WORKERS__EXECUTION_API_RETRY_WAIT_MAX="1",
        PYTHONPATH="",
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env


@pytest.fixture(scope="session")
def airflow_sdk(tmp_path_factory) -> None:
    """The real ``apache-airflow-task-sdk``, importable in a worker's environment (probed once
    per test process, not per module: a Python importing it costs seconds of CPU).

    Skips only when the package is not installed; installed but not importable (as in CI,
    which installs the ``airflow`` extra) is a failure, not a silent skip.
    """
    try:
        importlib.metadata.version("apache-airflow-task-sdk")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("apache-airflow-task-sdk is not installed (pip install -e '.[airflow]')")
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import airflow.sdk.api.client, airflow.sdk.execution_time.supervisor",
        ],
        env=airflow_env(tmp_path_factory.mktemp("probe")),
        capture_output=True,
        timeout=120,
        check=False,
    )
    if probe.returncode != 0:
        pytest.fail(f"airflow.sdk is installed but cannot be imported: {probe.stderr.decode()}")


@pytest.fixture
def declare() -> Callable[[str], None]:
    """Declare DAGs from a YAML manifest text (the declare_dags service)."""

    def _declare(text: str, fileloc: str = "tests.yaml") -> None:
        dags_declare(manifest=manifest_parse(yaml.safe_load(text)), fileloc=fileloc)

    return _declare


@pytest.fixture
def make_ti() -> Callable[..., TaskInstance]:
    """A task instance of (dag_id, task_id), running by default."""

    def _make(
        dag_id: str = "producer",
        task_id: str = "produce",
        state: str = TaskInstanceState.RUNNING,
        **kwargs: Any,
    ) -> TaskInstance:
        dag = DagFactory(dag_id=dag_id)
        run = kwargs.pop("dag_run", None) or DagRunFactory(dag=dag)
        defaults: dict[str, Any] = {
            "start_date": timezone.now() - timedelta(seconds=30),
            "hostname": "worker-1",
            "unixname": "airflow",
            "pid": 4242,
        }
        if state != TaskInstanceState.RUNNING:
            defaults = {}
        return TaskInstanceFactory(
            dag_run=run, task_id=task_id, state=state, **{**defaults, **kwargs}
        )

    return _make


def client_for(ti: TaskInstance | str, **token_kwargs: Any) -> APIClient:
    client = APIClient()
    token = token_issue(task_instance_id=getattr(ti, "pk", ti), **token_kwargs)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


@pytest.fixture
def runner() -> Callable[..., APIClient]:
    """An APIClient holding a valid token for the given task instance."""
    return client_for
