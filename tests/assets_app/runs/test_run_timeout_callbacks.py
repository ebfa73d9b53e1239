"""``dagrun_timeout`` (a run older than it fails, its unfinished task instances skipped, as
Airflow's scheduler does) and the callback requests the DAG processor runs: a DAG's
``on_success_callback`` / ``on_failure_callback`` a run's end creates — only for a DAG that has
one, so the others pay no statement more — and a task's ``on_retry_callback`` /
``on_failure_callback`` for a try that ended outside its process (a heartbeat timeout, a
queued timeout, its trigger's failure event), as Airflow's ``TaskCallbackRequest``."""

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
from assets_app.services.runs.triggers import trigger_task_end_submit
from assets_app.services.scheduling.upkeep import upkeep_pass
from tests.assets_app.runs.test_deferral import DEFER, start
from tests.assets_app.runs.test_task_flow import finish, states
from tests.executionapi.conftest import client_for, state_url

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
  - dag_id: nightly_warehouse_load
    airflow_dag_file: warehouse.py
    tags: [warehouse, nightly]
    tasks:
      - task_id: load_orders_from_the_payments_service_into_the_warehouse
        retries: 1
        has_on_failure_callback: true
        has_on_retry_callback: true
      - {task_id: notify, upstream: [load_orders_from_the_payments_service_into_the_warehouse]}
"""
LOAD = "load_orders_from_the_payments_service_into_the_warehouse"


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


def _running_since(run: DagRun, task_id: str, when) -> TaskInstance:
    ti = TaskInstance.objects.get(dag_run=run, task_id=task_id)
    TaskInstance.objects.filter(pk=ti.pk).update(
        state="running", start_date=when, last_heartbeat_at=when, hostname="worker-7", pid=4242
    )
    return ti


def test_a_try_reaped_asks_for_its_tasks_retry_then_failure_callback(settings):
    # given a task with both callbacks whose try stopped heartbeating
    settings.TASK_INSTANCE_HEARTBEAT_TIMEOUT = 300
    run = dag_run_trigger(dag_id="nightly_warehouse_load", conf={"day": "2026-12-05"})
    long_ago = timezone.now() - timedelta(minutes=10)
    _running_since(run, LOAD, long_ago)

    # when the reaper fails it with a try left, then its second try the same way
    assert [one.state for one in upkeep_pass().reaped] == ["up_for_retry"]
    TaskInstance.objects.filter(dag_run=run, task_id=LOAD).update(try_number=2)
    _running_since(run, LOAD, long_ago)
    assert [one.state for one in upkeep_pass().reaped] == ["failed"]

    # then the DAG processor is asked for its on_retry_callback, then its on_failure_callback,
    # each for the try that ended, with why
    requests = list(DagCallbackRequest.objects.filter(dag_run=run).order_by("pk"))
    assert [(r.task_id, r.map_index, r.try_number, r.kind) for r in requests] == [
        (LOAD, -1, 1, "retry"),
        (LOAD, -1, 2, "failure"),
    ]
    assert all(r.reason.startswith("heartbeat timeout: ") for r in requests)
    assert all("worker-7 pid 4242" in r.reason for r in requests)
    assert str(requests[1]) == (
        f"on_failure_callback of nightly_warehouse_load.{LOAD} run {run.pk} try 2"
    )
    # the run failed; the DAG has no callback of its own, so that is all
    assert DagRun.objects.get(pk=run.pk).state == "failed"
    assert DagCallbackRequest.objects.count() == 2


def test_a_task_without_callbacks_reaped_asks_for_none(settings):
    settings.TASK_INSTANCE_HEARTBEAT_TIMEOUT = 300
    run = dag_run_trigger(dag_id="nightly_warehouse_load")
    finish(run, LOAD, "success")
    _running_since(run, "notify", timezone.now() - timedelta(minutes=10))

    assert [one.state for one in upkeep_pass().reaped] == ["failed"]
    assert not DagCallbackRequest.objects.exists()


def test_a_queued_timeout_asks_for_the_failure_callback(settings):
    settings.TASK_QUEUED_TIMEOUT = 600
    run = dag_run_trigger(dag_id="nightly_warehouse_load")
    TaskInstance.objects.filter(dag_run=run, task_id=LOAD).update(
        state="queued", try_number=2, updated_at=timezone.now() - timedelta(minutes=11)
    )

    upkeep_pass()

    (request,) = DagCallbackRequest.objects.filter(dag_run=run)
    assert (request.kind, request.try_number) == ("failure", 2)
    assert request.reason.startswith("queued timeout: ")


@pytest.mark.parametrize(("tries_left", "kind"), [(True, "retry"), (False, "failure")])
def test_a_trigger_that_ends_its_task_failed_asks_for_its_callback(tries_left, kind):
    run = dag_run_trigger(dag_id="nightly_warehouse_load")
    ti = TaskInstance.objects.get(dag_run=run, task_id=LOAD)
    if not tries_left:
        TaskInstance.objects.filter(pk=ti.pk).update(max_tries=0)
    start(ti)
    response = client_for(ti).patch(state_url(ti), DEFER, format="json")
    assert response.status_code == 204, response.content
    ti.refresh_from_db()

    trigger_task_end_submit(trigger_id=ti.trigger_id, state="failed")
    trigger_task_end_submit(trigger_id=ti.trigger_id, state="failed")  # fired again: nothing

    (request,) = DagCallbackRequest.objects.filter(dag_run=run)
    assert (request.task_id, request.kind, request.try_number) == (LOAD, kind, 1)
    assert request.reason == "its trigger ended the task failed"


def test_a_trigger_that_ends_its_task_successfully_asks_for_no_callback():
    # as Airflow: the DAG processor runs only a task's failure and retry callbacks
    run = dag_run_trigger(dag_id="nightly_warehouse_load")
    ti = TaskInstance.objects.get(dag_run=run, task_id=LOAD)
    start(ti)
    assert client_for(ti).patch(state_url(ti), DEFER, format="json").status_code == 204
    ti.refresh_from_db()

    trigger_task_end_submit(trigger_id=ti.trigger_id, state="success")

    assert not DagCallbackRequest.objects.exists()


def test_a_task_callback_flag_needs_a_dag_file():
    document = {
        "dags": [
            {
                "dag_id": "d",
                "tasks": [{"task_id": "t", "callable": "tests.x:f", "has_on_retry_callback": True}],
            }
        ]
    }
    with pytest.raises(ManifestError, match="has_on_retry_callback: needs an airflow_dag_file"):
        manifest_parse(document)
