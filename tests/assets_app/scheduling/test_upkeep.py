"""``upkeep``: the heartbeat-timeout reaper and scheduling due retries."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection

from assets_app.models import DagRun, TaskInstance, TaskInstanceHistory
from assets_app.services.scheduling.upkeep import (
    task_instances_reap,
    task_instances_schedule_due,
    upkeep_pass,
)
from tests.executionapi.conftest import client_for, state_url
from tests.factories import DagRunFactory, TaskInstanceFactory

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def running(*, heartbeat_age: float | None, start_age: float = 1000, **kwargs) -> TaskInstance:
    kwargs.setdefault("dag_run", DagRunFactory(state="running"))  # as a started task's run is
    return TaskInstanceFactory(
        state="running",
        hostname="host-1",
        pid=77,
        start_date=NOW - timedelta(seconds=start_age),
        last_heartbeat_at=None if heartbeat_age is None else NOW - timedelta(seconds=heartbeat_age),
        **kwargs,
    )


@pytest.fixture(autouse=True)
def _timeout(settings):
    settings.TASK_INSTANCE_HEARTBEAT_TIMEOUT = 300


def test_a_task_instance_without_tries_left_is_failed_with_its_reason_and_its_run_settled():
    ti = running(heartbeat_age=301)

    [reaped] = task_instances_reap(now=NOW)

    assert (reaped.state, reaped.try_number, reaped.task_instance_id) == ("failed", 1, ti.pk)
    ti.refresh_from_db()
    assert (ti.state, ti.end_date, ti.duration) == ("failed", NOW, 1000.0)
    assert ti.failure_reason.startswith(
        "heartbeat timeout: no heartbeat for more than 300 s from host-1 pid 77 (last heartbeat "
    )
    run = DagRun.objects.get(pk=ti.dag_run_id)
    assert (run.state, run.end_date) == ("failed", NOW)


def test_a_task_instance_with_tries_left_is_retried_as_a_new_try():
    ti = running(heartbeat_age=None, start_age=400, max_tries=2)  # never heartbeated

    [reaped] = task_instances_reap(now=NOW)

    assert reaped.state == "up_for_retry"
    assert reaped.task_instance_id != ti.pk
    retry = TaskInstance.objects.get(pk=reaped.task_instance_id)
    assert (retry.state, retry.try_number) == ("up_for_retry", 1)
    assert "(last start " in retry.failure_reason
    [history] = TaskInstanceHistory.objects.all()
    assert (history.task_instance_id, history.state, history.end_date) == (ti.pk, "failed", NOW)
    assert DagRun.objects.get(pk=ti.dag_run_id).state != "failed"


def test_live_and_other_task_instances_are_left_alone():
    fresh = running(heartbeat_age=299)
    queued = TaskInstanceFactory(state="queued", updated_at=NOW - timedelta(days=1))

    assert task_instances_reap(now=NOW) == []

    assert TaskInstance.objects.get(pk=fresh.pk).state == "running"
    assert TaskInstance.objects.get(pk=queued.pk).state == "queued"


def test_the_timeout_is_the_setting(settings):
    settings.TASK_INSTANCE_HEARTBEAT_TIMEOUT = 10
    ti = running(heartbeat_age=11)

    assert [r.task_instance_id for r in task_instances_reap(now=NOW)] == [ti.pk]


def test_a_late_report_from_a_reaped_runner_gets_409():
    ti = running(heartbeat_age=301)
    task_instances_reap(now=NOW)
    client = client_for(ti)

    success = client.patch(
        state_url(ti),
        {
            "state": "success",
            "end_date": "2026-11-30T12:00:01Z",
            "task_outlets": [],
            "outlet_events": [],
        },
        format="json",
    )
    heartbeat = client.put(
        f"/execution/task-instances/{ti.pk}/heartbeat",
        {"hostname": "host-1", "pid": 77},
        format="json",
    )

    assert success.status_code == 409
    assert success.json()["detail"]["previous_state"] == "failed"
    assert heartbeat.status_code == 409
    assert heartbeat.json()["detail"]["reason"] == "not_running"
    assert TaskInstance.objects.get(pk=ti.pk).state == "failed"


def test_the_run_of_a_reaped_task_instance_waits_for_its_other_task_instances():
    run = DagRunFactory(state="running")
    ti = running(heartbeat_age=301, dag_run=run, task_id="a")
    running(heartbeat_age=1, dag_run=run, task_id="b")

    task_instances_reap(now=NOW)

    assert TaskInstance.objects.get(pk=ti.pk).state == "failed"
    assert DagRun.objects.get(pk=run.pk).state == "running"


def test_scheduler_command_reports_reaped_and_scheduled(settings):
    settings.TASK_INSTANCE_HEARTBEAT_TIMEOUT = 1
    running(
        heartbeat_age=None, start_age=3600, dag_run=DagRunFactory(run_id="manual__r"), task_id="t"
    )
    TaskInstanceFactory(state="up_for_retry", next_retry_at=NOW)
    out = StringIO()

    call_command("scheduler", "--once", stdout=out)

    lines = out.getvalue().splitlines()
    assert any(
        line.startswith("reaped ") and ".t @ manual__r try 1 (heartbeat timed out): failed" in line
        for line in lines
    ), lines
    assert "scheduled 1 retry(ies), 0 reschedule(s)" in lines


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_reapers_at_once_reap_each_task_instance_once():
    # given 30 timed-out task instances, half with a try left
    tis = [running(heartbeat_age=400, max_tries=i % 2) for i in range(30)]
    results: list[list] = [[], []]
    barrier = threading.Barrier(2)

    def reap(index: int) -> None:
        try:
            barrier.wait()
            results[index] = task_instances_reap(now=NOW)
        finally:
            connection.close()

    # when two schedulers reap at the same moment
    threads = [threading.Thread(target=reap, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    # then each was reaped exactly once: one history row per retried try, no more
    labels = [r.label for r in results[0] + results[1]]
    assert sorted(labels) == sorted(f"{ti.dag_id}.{ti.task_id} @ {ti.run_id}" for ti in tis)
    assert TaskInstanceHistory.objects.count() == 15
    assert TaskInstance.objects.filter(state="failed").count() == 15
    assert TaskInstance.objects.filter(state="up_for_retry", try_number=1).count() == 15


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_schedulers_count_each_due_retry_once():
    tis = [TaskInstanceFactory(state="up_for_retry", next_retry_at=NOW) for _ in range(40)]
    counts = [0, 0]
    barrier = threading.Barrier(2)

    def schedule(index: int) -> None:
        try:
            barrier.wait()
            counts[index] = task_instances_schedule_due(now=NOW)[0]
        finally:
            connection.close()

    threads = [threading.Thread(target=schedule, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    assert sum(counts) == 40
    assert set(
        TaskInstance.objects.filter(pk__in=[t.pk for t in tis]).values_list("state", "try_number")
    ) == {("scheduled", 2)}


def test_a_run_left_running_with_every_task_instance_finished_is_settled_by_upkeep():
    # given: a process finished the task instances and died before settling their runs
    stuck = DagRunFactory(state="running")
    TaskInstanceFactory(dag_run=stuck, task_id="a", state="success")
    TaskInstanceFactory(dag_run=stuck, task_id="b", state="failed")
    busy = DagRunFactory(state="running")
    TaskInstanceFactory(dag_run=busy, task_id="a", state="success")
    TaskInstanceFactory(dag_run=busy, task_id="b", state="scheduled")

    # when
    result = upkeep_pass(now=NOW)

    # then: only the run with nothing left to do ends (failed: one of its tries failed)
    assert result.runs_settled == 1
    assert DagRun.objects.get(pk=stuck.pk).state == "failed"
    assert DagRun.objects.get(pk=stuck.pk).end_date == NOW
    assert DagRun.objects.get(pk=busy.pk).state == "running"
    assert upkeep_pass(now=NOW).runs_settled == 0


def test_scheduler_command_reports_the_runs_it_settled():
    stuck = DagRunFactory(state="running")
    TaskInstanceFactory(dag_run=stuck, task_id="a", state="success")
    out = StringIO()

    call_command("scheduler", "--once", stdout=out)

    assert "settled 1 run(s) left running with nothing to run" in out.getvalue().splitlines()
    assert DagRun.objects.get(pk=stuck.pk).state == "success"
