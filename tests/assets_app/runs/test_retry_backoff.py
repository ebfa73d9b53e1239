"""Retry spacing with Airflow's ``retry_exponential_backoff`` and ``max_retry_delay``: the
delay before each next try is Airflow 3.3's own (``TaskInstance.next_retry_datetime``, its
jitter hashed from the task instance's key), computed once in ``services.runs.tries``."""

from __future__ import annotations

import importlib.util
import logging
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
import yaml

from assets_app.exceptions import ManifestError
from assets_app.models import DagTask, TaskInstance, TaskInstanceHistory
from assets_app.services.dags.declare import dags_declare
from assets_app.services.dags.manifest import manifest_parse
from assets_app.services.runs.dag_runs import dag_run_trigger
from assets_app.services.runs.tries import RetryPolicy, retry_delay_seconds
from tests.executionapi.conftest import client_for, state_url, wire_sample

LOGICAL = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)

POLICIES = [
    RetryPolicy(retry_delay=5, retry_exponential_backoff=2.0),
    RetryPolicy(retry_delay=240, retry_exponential_backoff=5.0),
    RetryPolicy(retry_delay=0, retry_exponential_backoff=2.0),
    RetryPolicy(retry_delay=0.4, retry_exponential_backoff=3.0),
    RetryPolicy(retry_delay=10, retry_exponential_backoff=2.0, max_retry_delay=60),
    RetryPolicy(retry_delay=3600, retry_exponential_backoff=10.0),  # the 24 h cap
    RetryPolicy(retry_delay=7, retry_exponential_backoff=0.0),
    RetryPolicy(retry_delay=7, retry_exponential_backoff=1.0),
]


def _airflow_delay(policy: RetryPolicy, *, logical_date: datetime | None, try_number: int) -> float:
    """Airflow's own ``next_retry_datetime`` on a task instance of that try."""
    from airflow.models.taskinstance import TaskInstance as AirflowTaskInstance

    end = datetime(2026, 1, 1, tzinfo=UTC)
    task = SimpleNamespace(
        retry_delay=timedelta(seconds=policy.retry_delay),
        retry_exponential_backoff=policy.retry_exponential_backoff,
        max_retry_delay=(
            timedelta(seconds=policy.max_retry_delay) if policy.max_retry_delay else None
        ),
    )
    ti = SimpleNamespace(
        retry_delay_override=None,
        task=task,
        try_number=try_number,
        dag_id="nightly",
        task_id="load",
        logical_date=logical_date,
        end_date=end,
        log=logging.getLogger(__name__),
    )
    return (AirflowTaskInstance.next_retry_datetime(ti) - end).total_seconds()


@pytest.mark.skipif(
    importlib.util.find_spec("airflow.models") is None, reason="apache-airflow-core is missing"
)
@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("logical_date", [LOGICAL, None])
def test_each_tries_delay_is_airflows(policy, logical_date, monkeypatch, tmp_path):
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path))
    for try_number in range(1, 9):
        ours = retry_delay_seconds(
            policy,
            dag_id="nightly",
            task_id="load",
            logical_date=logical_date,
            try_number=try_number,
        )
        assert ours == _airflow_delay(policy, logical_date=logical_date, try_number=try_number), (
            try_number
        )


BACKOFF = """
dags:
  - dag_id: flaky
    tasks:
      - task_id: call
        retries: 4
        retry_delay: 5
        retry_exponential_backoff: true
        max_retry_delay: 20
"""


@pytest.mark.django_db
def test_a_failed_try_waits_the_backoff_delay_before_its_next():
    # given a task declared with retries, backoff and a cap
    dags_declare(manifest=manifest_parse(yaml.safe_load(BACKOFF)), fileloc="flaky.yaml")
    task = DagTask.objects.get(dag_id="flaky", task_id="call")
    assert (task.retry_exponential_backoff, task.max_retry_delay) == (2.0, 20.0)
    run = dag_run_trigger(dag_id="flaky", logical_date=LOGICAL)
    policy = RetryPolicy(retry_delay=5, retry_exponential_backoff=2.0, max_retry_delay=20)
    end = datetime(2026, 12, 2, tzinfo=UTC)
    for try_number in (1, 2, 3):
        # when the try fails with tries left
        ti = TaskInstance.objects.get(dag_run=run)
        TaskInstance.objects.filter(pk=ti.pk).update(state="queued", try_number=try_number)
        client = client_for(ti)
        started = client.patch(
            f"/execution/task-instances/{ti.pk}/run", wire_sample("run_start"), format="json"
        )
        assert started.status_code == 200, started.content
        response = client.patch(
            state_url(ti), {"state": "up_for_retry", "end_date": end.isoformat()}, format="json"
        )
        assert response.status_code == 204, response.content

        # then its next try is due after Airflow's delay for that try, capped
        ti = TaskInstance.objects.get(dag_run=run)
        want = retry_delay_seconds(
            policy, dag_id="flaky", task_id="call", logical_date=LOGICAL, try_number=try_number
        )
        assert ti.state == "up_for_retry"
        assert ti.next_retry_at - end == timedelta(seconds=want)
        assert 0 < want <= 20
    assert TaskInstanceHistory.objects.filter(dag_run=run).count() == 3


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"retry_exponential_backoff": -1}, "retry_exponential_backoff: expected a multiplier"),
        ({"retry_exponential_backoff": "2"}, "retry_exponential_backoff: expected a multiplier"),
        ({"max_retry_delay": -3}, "max_retry_delay: expected seconds"),
    ],
)
def test_a_bad_backoff_is_refused_naming_the_dag_task_and_field(fields, message):
    document = {"dags": [{"dag_id": "d", "tasks": [{"task_id": "t", **fields}]}]}
    with pytest.raises(ManifestError, match=f"DAG 'd', task 't', {message}"):
        manifest_parse(document)
