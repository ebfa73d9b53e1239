"""Retries: a try that fails with tries left ends ``up_for_retry`` as a new try (a new id, the
old try kept in TaskInstanceHistory), scheduled again once its retry delay has passed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from assets_app.models import (
    DagRun,
    DagTask,
    TaskInstance,
    TaskInstanceHistory,
    TaskInstanceState,
)
from assets_app.services.runs.claims import task_instances_claim
from assets_app.services.scheduling.upkeep import task_instances_schedule_due
from tests.executionapi.conftest import client_for, state_url, wire_sample
from tests.factories import DagFactory, DagRunFactory, TaskInstanceFactory

pytestmark = pytest.mark.django_db

RUN_BODY = wire_sample("run_start")
END = datetime(2026, 11, 30, 5, 0, tzinfo=UTC)


def _start(ti: TaskInstance) -> dict:
    response = client_for(ti).patch(
        f"/execution/task-instances/{ti.pk}/run", RUN_BODY, format="json"
    )
    assert response.status_code == 200, response.content
    return response.json()


def _current(dag_run: DagRun) -> TaskInstance:
    return TaskInstance.objects.get(dag_run=dag_run, task_id="t")


@pytest.fixture
def first_try() -> TaskInstance:
    """Try 1 of a task declared with ``retries: 1`` and ``retry_delay: 60``, scheduled."""
    dag = DagFactory(dag_id="d", task_ids=["t"])
    DagTask.objects.create(dag=dag, task_id="t", retries=1, retry_delay=60)
    run = DagRunFactory(dag=dag, run_id="manual__1")
    return TaskInstanceFactory(
        dag_run=run, task_id="t", state=TaskInstanceState.SCHEDULED, max_tries=1
    )


def test_retries_1_first_try_fails_second_succeeds(first_try):
    run = first_try.dag_run
    # try 1: claimed, started (the server says a failure should be retried), fails
    [claimed] = task_instances_claim(limit=5)
    assert (claimed.pk, claimed.try_number) == (first_try.pk, 1)
    assert _start(first_try)["should_retry"] is True
    retry_body = {"state": "up_for_retry", "end_date": END.isoformat(), "retry_reason": "boom"}
    assert (
        client_for(first_try).patch(state_url(first_try), retry_body, format="json").status_code
        == 204
    )

    # then: the task instance is a new try waiting for its delay; try 1 is history
    second = _current(run)
    assert second.pk != first_try.pk
    assert (second.state, second.try_number) == ("up_for_retry", 1)
    assert second.next_retry_at == END + timedelta(seconds=60)
    assert second.failure_reason == "boom"
    [history] = TaskInstanceHistory.objects.all()
    assert (history.task_instance_id, history.try_number, history.state) == (
        first_try.pk,
        1,
        "failed",
    )
    assert history.end_date == END
    assert history.failure_reason == "boom"
    assert DagRun.objects.get(pk=run.pk).state == "running"

    # not before its delay has passed
    assert task_instances_schedule_due(now=END + timedelta(seconds=59)) == (0, 0)
    assert task_instances_claim(limit=5) == []
    assert task_instances_schedule_due(now=END + timedelta(seconds=60)) == (1, 0)
    second = _current(run)
    assert (second.state, second.try_number) == ("scheduled", 2)

    # try 2: claimed, started (no retry left), succeeds; the run succeeds
    [claimed] = task_instances_claim(limit=5)
    assert claimed.pk == second.pk
    assert _start(second)["should_retry"] is False
    success = {
        "state": "success",
        "end_date": "2026-11-30T06:00:00Z",
        "task_outlets": [],
        "outlet_events": [],
    }
    assert client_for(second).patch(state_url(second), success, format="json").status_code == 204
    second = _current(run)
    assert (second.state, second.try_number, second.failure_reason) == ("success", 2, "")
    run.refresh_from_db()
    assert run.state == "success"
    assert run.end_date is not None
    assert TaskInstanceHistory.objects.count() == 1


def test_a_late_report_from_the_old_try_gets_404_naming_the_try(first_try):
    task_instances_claim(limit=1)
    _start(first_try)
    old = client_for(first_try)
    assert (
        old.patch(
            state_url(first_try),
            {"state": "up_for_retry", "end_date": END.isoformat()},
            format="json",
        ).status_code
        == 204
    )
    new = _current(first_try.dag_run)

    # the old try's runner, late: a success, a heartbeat, a repeat of its report
    late_success = old.patch(
        state_url(first_try),
        {"state": "success", "end_date": END.isoformat(), "task_outlets": [], "outlet_events": []},
        format="json",
    )
    heartbeat = old.put(
        f"/execution/task-instances/{first_try.pk}/heartbeat",
        {"hostname": RUN_BODY["hostname"], "pid": RUN_BODY["pid"]},
        format="json",
    )

    # then 404 (Airflow: the try's id is gone), the body saying what became of it; the new
    # try is untouched
    assert (late_success.status_code, heartbeat.status_code) == (404, 404)
    detail = late_success.json()["detail"]
    assert detail["reason"] == "not_found"
    assert "was try 1 of d.t @ manual__1" in detail["message"]
    assert _current(first_try.dag_run).state == "up_for_retry"
    assert _current(first_try.dag_run).pk == new.pk


def test_the_runners_retry_delay_overrides_the_declared_one(first_try):
    task_instances_claim(limit=1)
    _start(first_try)
    body = {"state": "up_for_retry", "end_date": END.isoformat(), "retry_delay_seconds": 5}

    assert client_for(first_try).patch(state_url(first_try), body, format="json").status_code == 204

    assert _current(first_try.dag_run).next_retry_at == END + timedelta(seconds=5)


def test_an_undeclared_task_waits_airflows_default_300_s():
    ti = TaskInstanceFactory(state="running", max_tries=2, hostname="h", pid=1)

    response = client_for(ti).patch(
        state_url(ti), {"state": "up_for_retry", "end_date": END.isoformat()}, format="json"
    )

    assert response.status_code == 204
    retry = TaskInstance.objects.get(dag_run=ti.dag_run)
    assert retry.next_retry_at == END + timedelta(seconds=300)


def test_failed_stays_failed_even_with_tries_left(first_try):
    # As Airflow 3's execution API: the runner decides (it got should_retry from /run); a
    # `failed` report is final, e.g. for AirflowFailException.
    task_instances_claim(limit=1)
    _start(first_try)

    response = client_for(first_try).patch(
        state_url(first_try), {"state": "failed", "end_date": END.isoformat()}, format="json"
    )

    assert response.status_code == 204
    ti = _current(first_try.dag_run)
    assert (ti.pk, ti.state) == (first_try.pk, "failed")
    assert DagRun.objects.get(pk=ti.dag_run_id).state == "failed"
    assert not TaskInstanceHistory.objects.exists()


def test_due_rescheduled_task_instances_are_scheduled_with_the_same_try():
    due = TaskInstanceFactory(state="up_for_reschedule", reschedule_date=END, try_number=3)
    later = TaskInstanceFactory(
        state="up_for_reschedule", reschedule_date=END + timedelta(minutes=1)
    )

    assert task_instances_schedule_due(now=END) == (0, 1)

    due.refresh_from_db()
    later.refresh_from_db()
    assert (due.state, due.try_number) == ("scheduled", 3)
    assert later.state == "up_for_reschedule"
