"""Clearing (``manage.py clear_task_instances`` and the clearing service): finished task
instances run again as a new try; running ones are refused."""

from __future__ import annotations

import re
import shlex
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from assets_app.models import Dag, DagRun, DagTask, TaskInstance, TaskInstanceHistory
from assets_app.services.runs.admit import dag_runs_admit
from assets_app.services.runs.claims import task_instances_claim
from tests.docs.examples import doc_blocks
from tests.executionapi.conftest import client_for, state_url, wire_sample
from tests.factories import DagFactory, DagRunFactory, TaskInstanceFactory

pytestmark = pytest.mark.django_db

END = "2026-11-30T05:00:00Z"


def clear(*args: str) -> list[str]:
    out = StringIO()
    call_command("clear_task_instances", *args, stdout=out)
    return out.getvalue().splitlines()


def _run_of(ti: TaskInstance) -> DagRun:
    return DagRun.objects.get(pk=ti.dag_run_id)


def _ti(dag_run: DagRun, task_id: str = "t") -> TaskInstance:
    return TaskInstance.objects.get(dag_run=dag_run, task_id=task_id)


def _start_and_finish(ti: TaskInstance, state: str) -> None:
    client = client_for(ti)
    started = client.patch(
        f"/execution/task-instances/{ti.pk}/run", wire_sample("run_start"), format="json"
    )
    assert started.status_code == 200, started.content
    body: dict = {"state": state, "end_date": END}
    if state == "success":
        body.update(task_outlets=[], outlet_events=[])
    assert client.patch(state_url(ti), body, format="json").status_code == 204


@pytest.fixture
def dag():
    return DagFactory(dag_id="d", task_ids=["t", "u"])


def test_a_cleared_failed_run_runs_again_and_succeeds(dag):
    # given a run whose only task instance failed
    run = DagRunFactory(dag=dag, run_id="manual__1", state="queued")
    first = TaskInstanceFactory(dag_run=run, task_id="t", state="scheduled")
    task_instances_claim(limit=1)
    _start_and_finish(first, "failed")
    assert _run_of(first).state == "failed"

    # when it is cleared
    lines = clear("--dag-id=d", "--run-id=manual__1")

    # then it is a new try, scheduled; the run was queued again and, its DAG having room,
    # started at once (a task without upstreams is ready); try 1 is history
    assert lines == [
        "cleared d.t @ manual__1: failed → scheduled as try 2 (max_tries 1)",
        "requeued run d / manual__1",
        "cleared 1 task instance(s), 1 run(s) back to queued",
    ]
    second = _ti(run)
    assert second.pk != first.pk
    assert (second.state, second.try_number, second.end_date) == ("scheduled", 2, None)
    run.refresh_from_db()
    assert (run.state, run.end_date) == ("running", None)
    assert run.start_date is not None
    assert TaskInstanceHistory.objects.get().task_instance_id == first.pk

    # and it runs again (claimed by a worker) and succeeds: the run succeeds
    [claimed] = task_instances_claim(limit=5)
    assert claimed.pk == second.pk
    _start_and_finish(second, "success")
    run.refresh_from_db()
    assert run.state == "success"
    assert run.end_date is not None
    assert (_ti(run).state, _ti(run).try_number) == ("success", 2)


def test_clearing_a_running_task_instance_is_refused_and_changes_nothing(dag):
    run = DagRunFactory(dag=dag, run_id="manual__1", state="running")
    failed = TaskInstanceFactory(dag_run=run, task_id="t", state="failed")
    TaskInstanceFactory(dag_run=run, task_id="u", state="running")

    with pytest.raises(CommandError) as error:
        clear("--dag-id=d", "--run-id=manual__1")

    assert str(error.value) == (
        "cannot clear running task instance(s): d.u @ manual__1; wait until they finish (or "
        "are reaped), or narrow the selection (--task-id, --only-failed)"
    )
    assert TaskInstance.objects.get(pk=failed.pk).state == "failed"
    assert not TaskInstanceHistory.objects.exists()
    # narrowed to the failed one, it is cleared, and its running run goes back to queued (as
    # Airflow's clear), to be started again at once: its DAG has room
    assert clear("--dag-id=d", "--only-failed")[-1] == (
        "cleared 1 task instance(s), 1 run(s) back to queued"
    )
    assert _run_of(failed).state == "running"
    assert _ti(run, "t").state == "scheduled"


def test_a_run_requeued_by_a_clear_ends_only_once_the_cleared_task_instance_ran(dag):
    # given: a running run with a failed and a running task instance; the failed one cleared
    run = DagRunFactory(dag=dag, run_id="manual__1", state="running")
    TaskInstanceFactory(dag_run=run, task_id="t", state="failed")
    other = TaskInstanceFactory(dag_run=run, task_id="u", state="running")
    clear("--dag-id=d", "--only-failed")

    # when the other one finishes: the run does not end (the cleared one has not run)
    finish = client_for(other).patch(
        state_url(other), {"state": "failed", "end_date": END}, format="json"
    )

    # then
    assert finish.status_code == 204
    assert _run_of(other).state == "running"
    # and once the cleared one has been claimed, run and succeeded, the run ends
    [cleared] = task_instances_claim(limit=1)
    _start_and_finish(cleared, "success")
    run.refresh_from_db()
    assert run.state == "failed"
    assert run.end_date is not None


def test_dry_run_says_what_it_would_do_and_does_nothing(dag):
    run = DagRunFactory(dag=dag, run_id="manual__1", state="success")
    ti = TaskInstanceFactory(dag_run=run, task_id="t", state="success")
    TaskInstanceFactory(dag_run=run, task_id="u", state="scheduled")

    lines = clear("--dag-id=d", "--dry-run")

    assert lines == [
        "would clear d.t @ manual__1: success → scheduled as try 2 (max_tries 1)",
        "left alone d.u @ manual__1: scheduled (not finished)",
        "would requeue run d / manual__1",
        "would clear 1 task instance(s), 1 run(s) back to queued",
    ]
    assert TaskInstance.objects.get(pk=ti.pk).state == "success"
    assert _run_of(ti).state == "success"


def test_only_failed_and_task_id_narrow_the_selection(dag):
    run = DagRunFactory(dag=dag, run_id="manual__1", state="failed")
    TaskInstanceFactory(dag_run=run, task_id="t", state="success")
    TaskInstanceFactory(dag_run=run, task_id="u", state="upstream_failed")
    other = DagRunFactory(dag=dag, run_id="manual__2", state="failed")
    TaskInstanceFactory(dag_run=other, task_id="t", state="failed")

    assert clear("--dag-id=d", "--only-failed", "--task-id=u", "--dry-run")[0].startswith(
        "would clear d.u @ manual__1: upstream_failed"
    )
    assert clear("--dag-id=d", "--only-failed")[-1] == (
        "cleared 2 task instance(s), 2 run(s) back to queued"
    )
    assert _ti(run, "t").state == "success"
    assert {ti.state for ti in TaskInstance.objects.exclude(task_id="t", run_id="manual__1")} == {
        "scheduled"
    }


def test_max_tries_gets_the_declared_retries_again(dag):
    DagTask.objects.create(dag=dag, task_id="t", retries=2)
    run = DagRunFactory(dag=dag, state="failed")
    ti = TaskInstanceFactory(dag_run=run, task_id="t", state="failed", try_number=3, max_tries=2)

    clear("--dag-id=d")

    cleared = _ti(run)
    assert (cleared.try_number, cleared.max_tries) == (4, 5)  # Airflow: try_number + retries
    history = TaskInstanceHistory.objects.get()
    assert (history.task_instance_id, history.try_number, history.state) == (ti.pk, 3, "failed")


def test_an_up_for_retry_task_instance_is_not_archived_twice(dag):
    run = DagRunFactory(dag=dag, state="running")
    ti = TaskInstanceFactory(dag_run=run, task_id="t", state="running", max_tries=1, pid=1)
    client_for(ti).patch(state_url(ti), {"state": "up_for_retry", "end_date": END}, format="json")

    clear("--dag-id=d")

    assert (_ti(run).state, _ti(run).try_number) == ("scheduled", 2)
    assert TaskInstanceHistory.objects.count() == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["--dag-id=nope"], "no DAG 'nope'", id="unknown-dag"),
        pytest.param(["--dag-id=d", "--run-id=x"], "DAG 'd' has no run 'x'", id="unknown-run"),
    ],
)
def test_unknown_dag_or_run_is_a_command_error(dag, args, message):
    with pytest.raises(CommandError, match=message):
        clear(*args)


def test_create_task_instance_on_a_finished_one_says_how_to_clear_it():
    call_command(
        "create_task_instance", "--dag-id=d", "--task-id=t", "--run-id=r", stdout=StringIO()
    )
    TaskInstance.objects.update(state="failed")
    err = StringIO()

    call_command(
        "create_task_instance",
        "--dag-id=d",
        "--task-id=t",
        "--run-id=r",
        stdout=StringIO(),
        stderr=err,
    )

    assert (
        err.getvalue()
        .strip()
        .endswith(
            "already existed (state failed, try 1); it is finished: to run it again, "
            "manage.py clear_task_instances --dag-id d --run-id r --task-id t"
        )
    )


def test_the_docs_clear_example_prints_what_the_docs_show():
    [block] = [
        b.body
        for b in doc_blocks()
        if b.body.startswith("$ .venv/bin/python manage.py clear_task_instances ")
    ]
    match = re.match(
        r"\$ \.venv/bin/python manage\.py (clear_task_instances [^\n]*)\n(.*)", block, re.DOTALL
    )
    assert match, block
    command, *args = shlex.split(match.group(1))
    run = DagRunFactory(dag=DagFactory(dag_id="orders"), run_id="manual__1", state="failed")
    TaskInstanceFactory(dag_run=run, task_id="export_orders", state="failed")
    out = StringIO()

    call_command(command, *args, stdout=out)

    assert out.getvalue().splitlines() == match.group(2).splitlines()


def test_a_cleared_run_of_a_paused_dag_waits_queued_until_the_dag_is_unpaused(dag):
    run = DagRunFactory(dag=dag, run_id="manual__1", state="failed")
    TaskInstanceFactory(dag_run=run, task_id="t", state="failed")
    Dag.objects.filter(pk=dag.pk).update(is_paused=True)

    clear("--dag-id=d")

    assert (_run_of(_ti(run)).state, _ti(run).state) == ("queued", None)
    Dag.objects.filter(pk=dag.pk).update(is_paused=False)
    assert dag_runs_admit() == [run.pk]
    assert (_run_of(_ti(run)).state, _ti(run).state) == ("running", "scheduled")


def test_a_cleared_upstream_runs_before_its_downstream(dag):
    DagTask.objects.create(dag=dag, task_id="t", is_leaf=False)
    DagTask.objects.create(dag=dag, task_id="u", upstream=["t"])
    run = DagRunFactory(dag=dag, run_id="manual__1", state="failed")
    TaskInstanceFactory(dag_run=run, task_id="t", state="failed", has_downstream=True)
    TaskInstanceFactory(dag_run=run, task_id="u", state="upstream_failed")

    clear("--dag-id=d")

    assert (_ti(run, "t").state, _ti(run, "u").state) == ("scheduled", None)
    [claimed] = task_instances_claim(limit=5)
    _start_and_finish(claimed, "success")
    assert _ti(run, "u").state == "scheduled"  # handed over when t finished
