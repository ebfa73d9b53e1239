"""Fixtures of the execution API tests."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.utils import timezone
from rest_framework.test import APIClient

from assets_app.models import TaskInstance, TaskInstanceState
from assets_app.services.dags import dags_declare, manifest_parse
from executionapi.tokens import token_issue
from tests.factories import DagFactory, DagRunFactory, TaskInstanceFactory

WIRE_SAMPLES = Path(__file__).parent / "wire_samples"


def wire_sample(name: str) -> Any:
    """A body recorded from the real Airflow task SDK 1.3.2 (copied from shared/docs)."""
    return json.loads((WIRE_SAMPLES / f"{name}.json").read_text())


def state_url(ti: TaskInstance | str) -> str:
    return f"/execution/task-instances/{getattr(ti, 'pk', ti)}/state"


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
