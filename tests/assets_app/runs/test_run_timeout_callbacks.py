"""``dagrun_timeout`` (a run older than it fails, its unfinished task instances skipped, as
Airflow's scheduler does) and the requests of DAG-level ``on_success_callback`` /
``on_failure_callback`` a run's end creates — only for a DAG that has one, so the others pay
no statement more."""

from __future__ import annotations

from datetime import timedelta

import pytest
import yaml
from django.utils import timezone

from assets_app.exceptions import ManifestError
from assets_app.models import Dag, DagCallbackRequest, DagRun, TaskInstance
from assets_app.services.dags.declare import dags_declare
from assets_app.services.dags.manifest import manifest_parse
from assets_app.services.runs.dag_runs import dag_run_trigger
from assets_app.services.scheduling.upkeep import upkeep_pass
from tests.assets_app.runs.test_task_flow import finish, states

pytestmark = pytest.mark.django_db

DAGS = """
dags:
  - dag_id: slow
    dagrun_timeout: 60
    airflow_dag_file: slow.py
    has_on_failure_callback: true
    tasks:
      - {task_id: extract}
      - {task_id: load, upstream: [extract]}
      - {task_id: report, upstream: [load]}
  - dag_id: called
    airflow_dag_file: called.py
    has_on_success_callback: true
    has_on_failure_callback: true
    tasks: [{task_id: only}]
  - dag_id: quiet
    tasks: [{task_id: only}]
"""


@pytest.fixture(autouse=True)
def _dags(tmp_path):
    dags_declare(manifest=manifest_parse(yaml.safe_load(DAGS), base_dir=tmp_path), fileloc="t.yaml")


def test_a_run_past_its_timeout_fails_with_its_unfinished_task_instances_skipped():
    # given a run whose first task succeeded and whose second is running
    run = dag_run_trigger(dag_id="slow")
    finish(run, "extract", "success")
    load = TaskInstance.objects.get(dag_run=run, task_id="load")
    TaskInstance.objects.filter(pk=load.pk).update(state="running", start_date=timezone.now())
    assert Dag.objects.get(dag_id="slow").dagrun_timeout == 60

    # when the upkeep runs before and after the timeout
    assert upkeep_pass().runs_timed_out == []
    later = timezone.now() + timedelta(seconds=61)
    assert upkeep_pass(now=later).runs_timed_out == [run.pk]

    # then the run failed and its unfinished task instances were skipped (as Airflow)
    run.refresh_from_db()
    assert (run.state, run.end_date) == ("failed", later)
    assert states(run) == {"extract": "success", "load": "skipped", "report": "skipped"}
    tries = dict(TaskInstance.objects.filter(dag_run=run).values_list("task_id", "try_number"))
    assert tries == {"extract": 1, "load": 1, "report": 0}
    # its failure callback is asked for, with Airflow's reason
    (request,) = DagCallbackRequest.objects.filter(dag_run=run)
    assert (request.kind, request.reason, request.state) == ("failure", "timed_out", "pending")
    assert upkeep_pass(now=later).runs_timed_out == []  # once


@pytest.mark.parametrize(
    ("state", "kind", "reason"),
    [("success", "success", "success"), ("failed", "failure", "task_failure")],
)
def test_a_runs_end_asks_for_its_dags_callback_once(state, kind, reason):
    run = dag_run_trigger(dag_id="called")
    finish(run, "only", state)
    assert DagRun.objects.get(pk=run.pk).state == state
    (request,) = DagCallbackRequest.objects.filter(dag_run=run)
    assert (request.dag_id, request.kind, request.reason) == ("called", kind, reason)


def test_a_dag_without_callbacks_gets_no_request():
    run = dag_run_trigger(dag_id="quiet")
    finish(run, "only", "failed")
    assert DagRun.objects.get(pk=run.pk).state == "failed"
    assert not DagCallbackRequest.objects.exists()


def test_a_callback_flag_needs_a_dag_file():
    document = {"dags": [{"dag_id": "d", "has_on_success_callback": True}]}
    with pytest.raises(
        ManifestError, match="DAG 'd', has_on_success_callback: needs an airflow_dag_file"
    ):
        manifest_parse(document)


def test_the_admin_lists_callbacks_with_a_failed_ones_traceback(admin_client):
    from django.urls import reverse

    run = dag_run_trigger(dag_id="called")
    finish(run, "only", "failed")
    request = DagCallbackRequest.objects.get(dag_run=run)
    DagCallbackRequest.objects.filter(pk=request.pk).update(
        state="failed", error="Traceback ...\nRuntimeError: the callback broke"
    )
    listing = admin_client.get(reverse("admin:assets_app_dagcallbackrequest_changelist"))
    assert listing.status_code == 200
    assert "on_failure_callback of called" in listing.content.decode()
    page = admin_client.get(
        reverse("admin:assets_app_dagcallbackrequest_change", args=[request.pk])
    )
    assert page.status_code == 200
    assert "RuntimeError: the callback broke" in page.content.decode()
