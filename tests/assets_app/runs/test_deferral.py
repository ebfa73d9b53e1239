"""Deferred task instances (Airflow's deferral, docs/triggerer.md): the state patch stores a
trigger and parks the task instance without a worker slot; an event resumes it once with the
event as ``next_kwargs["event"]``; a failure or a timeout schedules it to fail with
``__fail__``; triggerers claim each trigger exactly once and take over a dead one's."""

from __future__ import annotations

import json
import threading
from datetime import timedelta

import pytest
import yaml
from django.db import connection
from django.utils import timezone

from assets_app.models import DagRun, Pool, TaskInstance, Trigger, Triggerer
from assets_app.services.dags.declare import dags_declare
from assets_app.services.dags.manifest import manifest_parse
from assets_app.services.runs.claims import task_instances_claim
from assets_app.services.runs.dag_runs import dag_run_trigger
from assets_app.services.runs.triggers import (
    task_instances_deferral_timeout,
    trigger_event_submit,
    trigger_failure_submit,
    triggerer_end,
    triggerer_register,
    triggers_assigned,
    triggers_claim,
    triggers_clean,
)
from assets_app.services.scheduling.upkeep import upkeep_pass
from tests.executionapi.conftest import client_for, state_url, wire_sample

pytestmark = pytest.mark.django_db

END = "2026-12-02T00:00:00Z"
SENSOR = """
dags:
  - dag_id: waits
    tasks:
      - {task_id: wait}
      - {task_id: after, upstream: [wait]}
"""
DEFER = {
    "state": "deferred",
    "classpath": "airflow.providers.standard.triggers.temporal.DateTimeTrigger",
    "trigger_kwargs": {"moment": "2026-12-03T00:00:00Z", "end_from_trigger": False},
    "next_method": "execute_complete",
    "next_kwargs": {"kept": 1},
}


def deferred_run(**changes: object) -> tuple[DagRun, TaskInstance]:
    """A run of ``waits`` whose ``wait`` started over HTTP and deferred."""
    dags_declare(manifest=manifest_parse(yaml.safe_load(SENSOR)), fileloc="waits.yaml")
    run = dag_run_trigger(dag_id="waits")
    ti = TaskInstance.objects.get(dag_run=run, task_id="wait")
    start(ti)
    response = client_for(ti).patch(state_url(ti), {**DEFER, **changes}, format="json")
    assert response.status_code == 204, response.content
    ti.refresh_from_db()
    return run, ti


def start(ti: TaskInstance) -> dict:
    TaskInstance.objects.filter(pk=ti.pk).update(state="queued")
    response = client_for(ti).patch(
        f"/execution/task-instances/{ti.pk}/run", wire_sample("run_start"), format="json"
    )
    assert response.status_code == 200, response.content
    return response.json()


def test_a_deferral_stores_a_trigger_and_holds_no_slot():
    _, ti = deferred_run(trigger_timeout="PT1H")

    assert ti.state == "deferred"
    trigger = Trigger.objects.get()
    assert ti.trigger_id == trigger.pk
    assert trigger.triggerer_id is None
    assert json.loads(trigger.kwargs) == DEFER["trigger_kwargs"]
    assert ti.trigger_timeout == trigger.created_date + timedelta(hours=1)
    # a deferred task instance holds no worker slot: nothing to claim, and again = unchanged
    assert task_instances_claim(limit=10) == []
    again = client_for(ti).patch(state_url(ti), DEFER, format="json")
    assert again.status_code == 200  # a retried report: nothing written
    assert Trigger.objects.count() == 1


def test_only_a_running_task_instance_defers():
    dags_declare(manifest=manifest_parse(yaml.safe_load(SENSOR)), fileloc="waits.yaml")
    run = dag_run_trigger(dag_id="waits")
    ti = TaskInstance.objects.get(dag_run=run, task_id="wait")
    TaskInstance.objects.filter(pk=ti.pk).update(state="queued")

    response = client_for(ti).patch(state_url(ti), DEFER, format="json")

    assert response.status_code == 409, response.content
    assert response.json()["detail"]["previous_state"] == "queued"
    assert Trigger.objects.count() == 0


def test_an_event_resumes_the_task_instance_once_with_the_event():
    _, ti = deferred_run()
    first_start = ti.start_date

    resumed = trigger_event_submit(trigger_id=ti.trigger_id, payload={"fired": True})
    again = trigger_event_submit(trigger_id=ti.trigger_id, payload={"fired": True})

    assert [one.task_instance_id for one in resumed] == [ti.pk]
    assert again == []  # a second firing (another triggerer) resumes nothing
    ti.refresh_from_db()
    assert (ti.state, ti.trigger_id, ti.try_number) == ("scheduled", None, 1)
    assert ti.next_kwargs == {"kept": 1, "event": {"fired": True}}
    assert Trigger.objects.count() == 0
    # a worker claims it and /run hands the method to resume with (Airflow's TIRunContext)
    assert [claimed.pk for claimed in task_instances_claim(limit=10)] == [ti.pk]
    context = start(ti)
    assert context["next_method"] == "execute_complete"
    assert context["next_kwargs"] == {"kept": 1, "event": {"fired": True}}
    ti.refresh_from_db()
    assert ti.start_date == first_start  # resuming keeps the try's start (Airflow)
    assert context["start_date"] is not None


def test_a_failed_trigger_schedules_its_task_instance_to_fail():
    _, ti = deferred_run()

    trigger_failure_submit(trigger_id=ti.trigger_id, traceback=["Traceback", "ValueError: bad"])

    ti.refresh_from_db()
    assert (ti.state, ti.next_method) == ("scheduled", "__fail__")
    assert ti.next_kwargs == {
        "error": "Trigger failure",
        "traceback": ["Traceback", "ValueError: bad"],
    }


def test_a_deferral_past_its_timeout_fails_without_a_triggerer():
    _, ti = deferred_run(trigger_timeout="PT1S")

    assert task_instances_deferral_timeout(now=timezone.now()) == 0
    result = upkeep_pass(now=timezone.now() + timedelta(seconds=2))

    assert result.deferrals_timed_out == 1
    ti.refresh_from_db()
    assert (ti.state, ti.next_method, ti.next_kwargs) == (
        "scheduled",
        "__fail__",
        {"error": "Trigger timeout"},
    )
    assert Trigger.objects.count() == 0  # unused now


def test_a_cleared_deferral_leaves_its_trigger_unused():
    _, ti = deferred_run()
    TaskInstance.objects.filter(pk=ti.pk).update(state="success")

    assert triggers_clean() == 1
    assert Trigger.objects.count() == 0


def test_deferred_task_instances_count_in_a_pool_only_if_it_says_so():
    Pool.objects.create(pool="one", slots=1, include_deferred=True)
    dags_declare(
        manifest=manifest_parse(
            yaml.safe_load(
                """
dags:
  - dag_id: pooled
    tasks:
      - {task_id: a, pool: one}
      - {task_id: b, pool: one}
"""
            )
        ),
        fileloc="pooled.yaml",
    )
    run = dag_run_trigger(dag_id="pooled")
    a = TaskInstance.objects.get(dag_run=run, task_id="a")
    TaskInstance.objects.filter(dag_run=run).exclude(pk=a.pk).update(state=None)
    start(a)
    client_for(a).patch(state_url(a), DEFER, format="json")
    TaskInstance.objects.filter(dag_run=run, task_id="b").update(state="scheduled")

    assert task_instances_claim(limit=10) == []  # a's deferral holds the one slot
    Pool.objects.filter(pool="one").update(include_deferred=False)
    assert [ti.task_id for ti in task_instances_claim(limit=10)] == ["b"]


# --- claiming ---------------------------------------------------------------------------------


def test_triggerers_claim_up_to_capacity_each_trigger_once():
    for _ in range(3):
        deferred_run_extra()
    one = triggerer_register(hostname="h", pid=1, capacity=2)
    two = triggerer_register(hostname="h", pid=2, capacity=2)

    assert triggers_claim(triggerer_id=one.pk, capacity=2).claimed == 2
    assert triggers_claim(triggerer_id=two.pk, capacity=2).claimed == 1
    assert triggers_claim(triggerer_id=one.pk, capacity=2).claimed == 0
    held_one = {work.id for work in triggers_assigned(triggerer_id=one.pk)}
    held_two = {work.id for work in triggers_assigned(triggerer_id=two.pk)}
    assert (len(held_one), len(held_two)) == (2, 1)
    assert not held_one & held_two


def test_a_dead_triggerers_triggers_move_to_a_live_one(settings):
    settings.TRIGGERER_HEALTH_CHECK_THRESHOLD = 30
    for _ in range(2):
        deferred_run_extra()
    dead = triggerer_register(hostname="h", pid=1, capacity=10)
    live = triggerer_register(hostname="h", pid=2, capacity=10)
    assert triggers_claim(triggerer_id=dead.pk, capacity=10).claimed == 2
    assert triggers_claim(triggerer_id=live.pk, capacity=10).claimed == 0

    Triggerer.objects.filter(pk=dead.pk).update(heartbeat=timezone.now() - timedelta(seconds=31))
    moved = triggers_claim(triggerer_id=live.pk, capacity=10)

    assert (moved.released, moved.claimed) == (2, 2)
    assert triggers_assigned(triggerer_id=dead.pk) == []


def test_a_triggerer_that_stops_hands_its_triggers_back_at_once():
    deferred_run_extra()
    leaving = triggerer_register(hostname="h", pid=1, capacity=10)
    triggers_claim(triggerer_id=leaving.pk, capacity=10)

    assert triggerer_end(triggerer_id=leaving.pk) == 1
    other = triggerer_register(hostname="h", pid=2, capacity=10)
    assert triggers_claim(triggerer_id=other.pk, capacity=10).claimed == 1


_runs = iter(range(10_000))


def deferred_run_extra() -> TaskInstance:
    """Another deferred task instance of its own DAG."""
    n = next(_runs)
    dags_declare(
        manifest=manifest_parse(
            yaml.safe_load(f"dags:\n  - dag_id: w{n}\n    tasks:\n      - {{task_id: wait}}\n")
        ),
        fileloc=f"w{n}.yaml",
    )
    run = dag_run_trigger(dag_id=f"w{n}")
    ti = TaskInstance.objects.get(dag_run=run, task_id="wait")
    start(ti)
    assert client_for(ti).patch(state_url(ti), DEFER, format="json").status_code == 204
    return ti


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_claims_share_the_triggers_on_postgresql():
    for _ in range(20):
        deferred_run_extra()
    claimers = [triggerer_register(hostname="h", pid=n, capacity=1000) for n in range(4)]
    barrier = threading.Barrier(len(claimers))
    errors: list[BaseException] = []

    def claim(triggerer_id: int) -> None:
        try:
            barrier.wait()
            triggers_claim(triggerer_id=triggerer_id, capacity=1000)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=claim, args=(c.pk,)) for c in claimers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    held = [work.id for claimer in claimers for work in triggers_assigned(triggerer_id=claimer.pk)]
    assert sorted(held) == sorted(Trigger.objects.values_list("pk", flat=True))  # each once


# --- the admin ------------------------------------------------------------------------------


def test_the_admin_says_when_deferred_task_instances_wait_and_no_triggerer_is_alive(
    admin_client,
):
    from tests.assets_app.admin import change, changelist, page_text

    _, ti = deferred_run(trigger_timeout="PT1H")

    listed = page_text(admin_client, changelist("taskinstance"))
    assert "1 task instance(s) deferred, and no triggerer is alive" in listed
    page = page_text(admin_client, change("taskinstance", ti.pk))
    assert "its trigger airflow.providers.standard.triggers.temporal.DateTimeTrigger" in page
    assert "no triggerer is alive" in page

    triggerer_register(hostname="h", pid=1, capacity=10)
    assert "no triggerer is alive" not in page_text(admin_client, changelist("taskinstance"))
    assert "no triggerer is alive" not in page_text(admin_client, change("taskinstance", ti.pk))


# --- start_from_trigger -----------------------------------------------------------------------

STARTS_IN_TRIGGERER = """
dags:
  - dag_id: starts
    tasks:
      - task_id: wait
        start_trigger_args:
          trigger_cls: airflow.providers.standard.triggers.temporal.DateTimeTrigger
          trigger_kwargs: {target_time: "2026-12-03T00:00:00+00:00", end_from_trigger: false}
          next_method: execute_complete
          next_kwargs: {}
          timeout: 60
      - {task_id: after, upstream: [wait]}
"""


def test_a_start_from_trigger_task_starts_deferred_without_a_worker():
    dags_declare(manifest=manifest_parse(yaml.safe_load(STARTS_IN_TRIGGERER)), fileloc="s.yaml")
    run = dag_run_trigger(dag_id="starts")
    ti = TaskInstance.objects.get(dag_run=run, task_id="wait")
    assert ti.state == "scheduled"

    # no worker claims it: the scheduler's (or a triggerer's) pass defers it with its trigger
    assert task_instances_claim(limit=10) == []
    assert upkeep_pass().started_in_triggerer == 1
    ti.refresh_from_db()
    assert (ti.state, ti.next_method, ti.next_kwargs) == ("deferred", "execute_complete", {})
    assert ti.trigger.classpath.endswith("DateTimeTrigger")
    assert json.loads(ti.trigger.kwargs)["target_time"] == "2026-12-03T00:00:00+00:00"
    assert ti.trigger_timeout == ti.start_date + timedelta(seconds=60)

    # its event: a worker claims it and runs the next method
    trigger_event_submit(trigger_id=ti.trigger_id, payload="fired")
    assert upkeep_pass().started_in_triggerer == 0  # resumed: it runs on a worker now
    assert [claimed.pk for claimed in task_instances_claim(limit=10)] == [ti.pk]
    context = start(ti)
    assert (context["next_method"], context["next_kwargs"]) == (
        "execute_complete",
        {"event": "fired"},
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ("[]", "expected a mapping"),
        ("{next_method: x}", "trigger_cls: expected a name"),
        ("{trigger_cls: a.B, next_method: x, timeout: -1}", "timeout: expected a positive"),
        ("{trigger_cls: a.B, next_method: x, trigger_kwargs: 3}", "trigger_kwargs: expected"),
        ("{trigger_cls: a.B, next_method: x, other: 1}", "unknown key(s) other"),
    ],
)
def test_bad_start_trigger_args_are_refused_naming_the_field(args, message):
    from assets_app.services.dags.manifest import ManifestError

    text = f"dags:\n  - dag_id: s\n    tasks:\n      - {{task_id: w, start_trigger_args: {args}}}\n"
    with pytest.raises(ManifestError, match="task 'w', start_trigger_args") as raised:
        manifest_parse(yaml.safe_load(text))
    assert message in str(raised.value)


# --- end_from_trigger -------------------------------------------------------------------------


def test_a_task_end_event_ends_the_task_instance_without_a_worker():
    from assets_app.models import XCom
    from assets_app.services.runs.triggers import trigger_task_end_submit

    run, ti = deferred_run()

    ended = trigger_task_end_submit(
        trigger_id=ti.trigger_id, state="success", xcoms={"return_value": {"n": 1}}
    )
    again = trigger_task_end_submit(trigger_id=ti.trigger_id, state="success")

    assert [one.task_instance_id for one in ended] == [ti.pk]
    assert again == []
    ti.refresh_from_db()
    assert (ti.state, ti.next_method, ti.trigger_id) == ("success", None, None)
    assert ti.end_date is not None
    assert XCom.objects.get(task_id="wait", key="return_value").value == {"n": 1}
    # the run moved on: its downstream is scheduled, no worker ever claimed "wait" again
    assert TaskInstance.objects.get(dag_run=run, task_id="after").state == "scheduled"
    assert Trigger.objects.count() == 0


def test_a_task_failed_event_with_tries_left_retries():
    from assets_app.services.runs.triggers import trigger_task_end_submit

    run, ti = deferred_run()
    TaskInstance.objects.filter(pk=ti.pk).update(max_tries=1)

    trigger_task_end_submit(trigger_id=ti.trigger_id, state="failed")

    now = TaskInstance.objects.get(dag_run=run, task_id="wait")
    assert now.state == "up_for_retry"
    assert now.pk != ti.pk  # a new try
