"""Runs that follow their DAG: task instances decided by their trigger rules as their upstreams
finish through the execution API (the hand-over), runs settled by their leaves, queued runs
admitted as ``max_active_runs`` allows, and never-started task instances that end."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
import yaml
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from assets_app.models import DagRun, TaskInstance
from assets_app.services.assets.events import asset_event_create_manual
from assets_app.services.dags.declare import dags_declare
from assets_app.services.dags.manifest import manifest_parse
from assets_app.services.runs.admit import dag_runs_admit
from assets_app.services.runs.advance import task_instances_advance
from assets_app.services.runs.claims import task_instances_claim
from assets_app.services.runs.dag_runs import dag_run_trigger
from assets_app.services.runs.settle import dag_run_settle
from assets_app.services.scheduling.scheduler import Outcome, scheduler_pass
from assets_app.services.scheduling.upkeep import upkeep_pass
from tests.executionapi.conftest import client_for, state_url, wire_sample

pytestmark = pytest.mark.django_db

END = "2026-12-02T00:00:00Z"


def declare(text: str) -> None:
    dags_declare(manifest=manifest_parse(yaml.safe_load(text)), fileloc="flow.yaml")


def states(run: DagRun) -> dict[str, str | None]:
    return dict(TaskInstance.objects.filter(dag_run=run).values_list("task_id", "state"))


def tries(run: DagRun) -> dict[str, int]:
    return dict(TaskInstance.objects.filter(dag_run=run).values_list("task_id", "try_number"))


def run_state(run: DagRun) -> str:
    run.refresh_from_db()
    return run.state


def finish(
    run: DagRun,
    task_id: str,
    state: str,
    *,
    map_index: int = -1,
    returns: Any = None,
    mapped_length: int | None = None,
) -> None:
    """Claim the task instance (of ``map_index``) as a worker would, start it, push its return
    value when it ``returns`` one (with ``mapped_length`` as the SDK sends it when a mapped
    task maps over it) and report ``state`` over HTTP."""
    ti = TaskInstance.objects.get(dag_run=run, task_id=task_id, map_index=map_index)
    assert ti.state == "scheduled", f"{task_id}[{map_index}] is {ti.state}, not scheduled"
    TaskInstance.objects.filter(pk=ti.pk).update(state="queued")
    client = client_for(ti)
    started = client.patch(
        f"/execution/task-instances/{ti.pk}/run", wire_sample("run_start"), format="json"
    )
    assert started.status_code == 200, started.content
    if returns is not None:
        query = f"?map_index={map_index}"
        if mapped_length is not None:
            query += f"&mapped_length={mapped_length}"
        pushed = client.post(
            f"/execution/xcoms/{run.dag_id}/{run.run_id}/{task_id}/return_value{query}",
            data=json.dumps(returns),
            content_type="application/json",
        )
        assert pushed.status_code == 201, pushed.content
    body: dict = {"state": state, "end_date": END}
    if state == "success":
        body.update(task_outlets=[], outlet_events=[])
    response = client.patch(state_url(ti), body, format="json")
    assert response.status_code == 204, response.content


CHAIN = """
dags:
  - dag_id: etl
    tasks:
      - {task_id: extract}
      - {task_id: transform, upstream: [extract]}
      - {task_id: load, upstream: [transform]}
"""

DIAMOND = """
dags:
  - dag_id: diamond
    tasks:
      - {task_id: a}
      - {task_id: b, upstream: [a]}
      - {task_id: c, upstream: [a]}
      - {task_id: d, upstream: [b, c]}
      - {task_id: cleanup, upstream: [d], trigger_rule: all_done}
"""


def test_a_chain_runs_in_order_each_task_handed_over_when_its_upstream_succeeds():
    declare(CHAIN)
    run = dag_run_trigger(dag_id="etl")
    assert states(run) == {"extract": "scheduled", "transform": None, "load": None}
    assert run.state == "running"
    # a leaf's finish hands nothing over: the row says which tasks others depend on
    assert dict(
        TaskInstance.objects.filter(dag_run=run).values_list("task_id", "has_downstream")
    ) == {"extract": True, "transform": True, "load": False}

    finish(run, "extract", "success")
    assert states(run) == {"extract": "success", "transform": "scheduled", "load": None}
    finish(run, "transform", "success")
    assert states(run)["load"] == "scheduled"
    assert run_state(run) == "running"
    finish(run, "load", "success")

    assert run_state(run) == "success"
    assert run.end_date is not None


def test_a_failure_propagates_as_upstream_failed_and_the_leaves_decide_the_run():
    declare(DIAMOND)
    run = dag_run_trigger(dag_id="diamond")
    finish(run, "a", "success")
    assert states(run) == {"a": "success", "b": "scheduled", "c": "scheduled", "d": None,
                           "cleanup": None}  # fmt: skip

    finish(run, "b", "failed")
    # d can never run (all_success with a failed upstream): decided at once, without waiting
    # for c; cleanup (all_done) then has its one upstream done
    assert states(run)["d"] == "upstream_failed"
    assert states(run)["cleanup"] == "scheduled"
    finish(run, "c", "success")
    finish(run, "cleanup", "success")

    # the only leaf (cleanup) succeeded: the run succeeds, as in Airflow
    assert run_state(run) == "success"


def test_a_failed_leaf_fails_the_run():
    declare(CHAIN)
    run = dag_run_trigger(dag_id="etl")
    finish(run, "extract", "failed")

    assert states(run) == {"extract": "failed", "transform": "upstream_failed",
                           "load": "upstream_failed"}  # fmt: skip
    assert run_state(run) == "failed"
    # never scheduled, never tried: try 0, as Airflow counts tries when it schedules one
    assert tries(run) == {"extract": 1, "transform": 0, "load": 0}


def test_fan_out_fan_in_with_one_success_and_skips():
    declare(
        """
dags:
  - dag_id: fan
    tasks:
      - {task_id: start}
      - {task_id: left, upstream: [start]}
      - {task_id: right, upstream: [start]}
      - {task_id: join, upstream: [left, right], trigger_rule: one_success}
      - {task_id: after, upstream: [join], trigger_rule: none_failed}
"""
    )
    run = dag_run_trigger(dag_id="fan")
    finish(run, "start", "success")
    finish(run, "left", "skipped")
    assert states(run)["join"] is None  # one_success: waits for right
    finish(run, "right", "success")
    assert states(run)["join"] == "scheduled"
    finish(run, "join", "success")
    finish(run, "after", "success")
    assert run_state(run) == "success"


def test_skip_downstream_skips_the_branch_not_taken_and_the_run_succeeds():
    declare(
        """
dags:
  - dag_id: branchy
    tasks:
      - {task_id: choose}
      - {task_id: left, upstream: [choose]}
      - {task_id: right, upstream: [choose]}
      - {task_id: right_after, upstream: [right]}
      - {task_id: join, upstream: [left, right_after], trigger_rule: none_failed_min_one_success}
"""
    )
    run = dag_run_trigger(dag_id="branchy")
    choose = TaskInstance.objects.get(dag_run=run, task_id="choose")
    TaskInstance.objects.filter(pk=choose.pk).update(state="running")

    response = client_for(choose).patch(
        f"/execution/task-instances/{choose.pk}/skip-downstream",
        {"tasks": ["right", ["left", 7]]},  # a mapped index that does not exist: nothing
        format="json",
    )
    assert response.status_code == 204, response.content
    assert states(run)["right"] == "skipped"
    response = client_for(choose).patch(
        state_url(choose),
        {"state": "success", "end_date": END, "task_outlets": [], "outlet_events": []},
        format="json",
    )
    assert response.status_code == 204

    assert states(run) == {"choose": "success", "left": "scheduled", "right": "skipped",
                           "right_after": "skipped", "join": None}  # fmt: skip
    finish(run, "left", "success")
    finish(run, "join", "success")
    assert run_state(run) == "success"
    # skipped by the branch (right) or by its trigger rule (right_after): never tried, try 0
    assert tries(run) == {"choose": 1, "left": 1, "right": 0, "right_after": 0, "join": 1}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        pytest.param({}, "tasks", id="missing"),
        pytest.param({"tasks": "right"}, "tasks", id="not-a-list"),
        pytest.param({"tasks": [["right"]]}, "tasks", id="short-pair"),
        pytest.param({"tasks": [["right", "x"]]}, "tasks", id="bad-map-index"),
        pytest.param({"tasks": [""]}, "tasks", id="empty-id"),
        pytest.param({"tasks": [], "extra": 1}, "extra", id="unknown-field"),
    ],
)
def test_skip_downstream_refuses_a_bad_body_naming_the_field(body, field):
    declare(CHAIN)
    run = dag_run_trigger(dag_id="etl")
    ti = TaskInstance.objects.get(dag_run=run, task_id="extract")

    response = client_for(ti).patch(
        f"/execution/task-instances/{ti.pk}/skip-downstream", body, format="json"
    )

    assert response.status_code == 422, response.content
    assert field in response.content.decode()
    assert states(run) == {"extract": "scheduled", "transform": None, "load": None}


def test_a_skip_never_overwrites_a_running_or_finished_task_instance():
    declare(CHAIN)
    run = dag_run_trigger(dag_id="etl")
    TaskInstance.objects.filter(dag_run=run, task_id="transform").update(state="success")
    TaskInstance.objects.filter(dag_run=run, task_id="load").update(state="running")
    extract = TaskInstance.objects.get(dag_run=run, task_id="extract")

    client_for(extract).patch(
        f"/execution/task-instances/{extract.pk}/skip-downstream",
        {"tasks": ["transform", "load"]},
        format="json",
    )

    assert states(run) == {"extract": "scheduled", "transform": "success", "load": "running"}


def test_max_active_runs_admits_queued_runs_one_after_another():
    declare(CHAIN.replace("dag_id: etl", "dag_id: etl\n    max_active_runs: 1"))
    first = dag_run_trigger(dag_id="etl", run_id="first")
    second = dag_run_trigger(dag_id="etl", run_id="second")
    assert (run_state(first), run_state(second)) == ("running", "queued")
    assert set(states(second).values()) == {None}
    assert dag_runs_admit() == []  # no room

    for task_id in ("extract", "transform", "load"):
        finish(first, task_id, "success")
    assert run_state(first) == "success"

    assert dag_runs_admit() == [second.pk]
    assert run_state(second) == "running"
    assert states(second)["extract"] == "scheduled"


def test_a_paused_dags_triggered_run_waits_queued_until_unpaused():
    declare(CHAIN.replace("dag_id: etl", "dag_id: etl\n    is_paused: true"))
    run = dag_run_trigger(dag_id="etl")
    assert (run.state, set(states(run).values())) == ("queued", {None})
    assert dag_runs_admit() == []

    declare(CHAIN.replace("dag_id: etl", "dag_id: etl\n    is_paused: false"))
    assert dag_runs_admit() == [run.pk]
    assert states(run)["extract"] == "scheduled"


def test_max_active_tasks_caps_what_the_workers_claim():
    declare(
        """
dags:
  - dag_id: wide
    max_active_tasks: 2
    tasks: [{task_id: a}, {task_id: b}, {task_id: c}]
"""
    )
    dag_run_trigger(dag_id="wide")

    assert len(task_instances_claim(limit=10)) == 2
    assert task_instances_claim(limit=10) == []  # both slots taken until one finishes
    TaskInstance.objects.filter(task_id="a").update(state="success")
    assert [ti.task_id for ti in task_instances_claim(limit=10)] == ["c"]


def test_a_queued_task_instance_no_runner_starts_fails_after_the_queued_timeout(settings):
    settings.TASK_QUEUED_TIMEOUT = 60
    declare(CHAIN)
    run = dag_run_trigger(dag_id="etl")
    [claimed] = task_instances_claim(limit=1)
    later = timezone.now() + timedelta(seconds=61)

    assert upkeep_pass(now=timezone.now()).unstarted == []
    result = upkeep_pass(now=later)

    assert [stuck.label for stuck in result.unstarted] == [f"etl.extract @ {run.run_id}"]
    claimed.refresh_from_db()
    assert claimed.state == "failed"
    assert "queued timeout" in claimed.failure_reason
    assert states(run) == {"extract": "failed", "transform": "upstream_failed",
                           "load": "upstream_failed"}  # fmt: skip
    assert run_state(run) == "failed"
    # never scheduled, never tried: try 0, as Airflow counts tries when it schedules one
    assert tries(run) == {"extract": 1, "transform": 0, "load": 0}


def test_a_pass_decides_waiting_task_instances_in_a_fixed_number_of_statements():
    declare(CHAIN)
    runs = [dag_run_trigger(dag_id="etl", run_id=f"r{i}") for i in range(12)]
    # the upstreams finished behind the API's back (as a process that died before its
    # hand-over would leave them): the pass catches up
    TaskInstance.objects.filter(task_id="extract").update(state="success")
    few = runs[:2]
    TaskInstance.objects.filter(dag_run__in=few, task_id="transform").update(state="failed")

    with CaptureQueriesContext(connection) as queries:
        result = task_instances_advance()

    assert (result.scheduled, result.upstream_failed) == (10, 2)
    assert result.runs_settled == 2  # transform failed → load upstream_failed → run failed
    # two reads, one UPDATE per new state, the notification (PostgreSQL), one settle per run
    # that ended: the same for 12 runs as for 1200
    assert len(queries) == 2 + 2 + (connection.vendor == "postgresql") + 2
    assert {run_state(run) for run in few} == {"failed"}


def test_a_capped_consumer_waits_without_a_transaction_and_gets_its_run_when_a_slot_frees():
    declare(
        """
dags:
  - dag_id: producer
    tasks: [{task_id: p, outlets: [{asset: {name: landed}}]}]
  - dag_id: consumer
    schedule: {asset: {name: landed}}
    max_active_runs: 1
    tasks: [{task_id: c}]
"""
    )
    asset_event_create_manual(name="landed")
    (first,) = scheduler_pass().created
    second_event = asset_event_create_manual(name="landed")

    with CaptureQueriesContext(connection) as queries:
        result = scheduler_pass()
    assert [o.outcome for o in result.outcomes] == [Outcome.CAPPED]
    assert len(queries) == 1  # the lock-free read only

    TaskInstance.objects.filter(dag_run_id=first.dag_run_pk).update(state="success")
    assert dag_run_settle(dag_run_id=first.dag_run_pk)
    (second,) = scheduler_pass().created
    assert second.event_ids == (second_event.pk,)


def test_a_pass_between_full_ones_leaves_runs_where_nothing_changed_lately():
    declare(CHAIN)
    run = dag_run_trigger(dag_id="etl")
    long_ago = timezone.now() - timedelta(hours=1)
    TaskInstance.objects.filter(dag_run=run, task_id="extract").update(
        state="success", updated_at=long_ago
    )
    TaskInstance.objects.filter(dag_run=run).exclude(task_id="extract").update(updated_at=long_ago)

    assert (
        task_instances_advance(changed_since=timezone.now() - timedelta(seconds=10)).scheduled == 0
    )
    assert task_instances_advance().scheduled == 1  # the full pass catches it
