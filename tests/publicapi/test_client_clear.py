"""Airflow's client clears a run through /api/v2, against a live server: the real clear's run
parses in its models; the dry run's list of task instances is Airflow's own answer, which Airflow's
client 3.3.2 cannot parse (its ``TaskInstancesInner`` is a oneOf of ``TaskInstanceResponse`` and
``NewTaskResponse`` without a discriminator, and every task instance also matches the latter), so
it is read as docs/api-v2.md says: without the client's parsing, each entry a
``TaskInstanceResponse``."""

from __future__ import annotations

import json

import pytest
from airflow_client.client.api.dag_run_api import DagRunApi
from airflow_client.client.models.dag_run_clear_body import DAGRunClearBody
from airflow_client.client.models.task_instance_response import TaskInstanceResponse
from airflow_client.client.models.task_instances_inner import TaskInstancesInner
from django.contrib.auth.models import User

from assets_app.models import TaskInstance
from tests.factories import DagFactory, DagRunFactory, TaskInstanceFactory
from tests.publicapi.test_airflow_client import api_client, login

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_airflows_client_clears_a_run_dry_and_for_real(server):
    User.objects.create_superuser("ops", "ops@example.com", "s3cret")
    dag = DagFactory(dag_id="nightly_exports", tags=["finance"])
    run = DagRunFactory(dag=dag, run_id="scheduled__2026-12-04T00:00:00+00:00", state="failed")
    TaskInstanceFactory(dag_run=run, task_id="extract", state="success")
    TaskInstanceFactory(dag_run=run, task_id="load", state="failed")
    runs = DagRunApi(api_client(server.url, login(server.url, "ops", "s3cret")))

    dry = runs.clear_dag_run_without_preload_content(
        "nightly_exports", run.run_id, DAGRunClearBody(dry_run=True, only_failed=True)
    )
    listed = json.loads(dry.data)
    assert dry.status == 200
    assert listed["total_entries"] == 1
    would_clear = [TaskInstanceResponse.from_dict(entry) for entry in listed["task_instances"]]
    assert [(ti.task_id, ti.state, ti.dag_run_id) for ti in would_clear] == [
        ("load", "failed", run.run_id)
    ]
    with pytest.raises(ValueError, match="Multiple matches"):  # the client's own limit
        TaskInstancesInner.from_dict(listed["task_instances"][0])
    assert TaskInstance.objects.get(task_id="load").state == "failed"

    cleared = runs.clear_dag_run(
        "nightly_exports", run.run_id, DAGRunClearBody(dry_run=False, only_failed=True)
    )
    assert cleared.actual_instance.dag_run_id == run.run_id
    # back to queued, and admitted at once (its DAG has no run active): Airflow's scheduler
    # would do the same on its next pass
    assert cleared.actual_instance.state == "running"
    assert TaskInstance.objects.get(task_id="load").state == "scheduled"  # to run again
    assert TaskInstance.objects.get(task_id="extract").state == "success"  # only_failed
