"""A DAG run's state follows its task instances: queued → running → success / failed."""

from __future__ import annotations

import logging
from datetime import datetime

import pytest
from django.db import connection
from django.utils import timezone

from assets_app.models import DagRun, DagRunState, TaskInstance, TaskInstanceState
from assets_app.services.runs.dag_runs import task_instance_create
from assets_app.services.sql import Statement
from tests.executionapi.conftest import client_for, state_url, wire_sample
from tests.factories import DagFactory, DagRunFactory, TaskInstanceFactory

pytestmark = pytest.mark.django_db

END = "2026-11-30T04:50:58.540508Z"
RUN_BODY = wire_sample("run_start")


def _run_with(*states: str, run_state: str = DagRunState.RUNNING) -> list[TaskInstance]:
    run = DagRunFactory(dag=DagFactory(dag_id="d"), state=run_state)
    return [
        TaskInstanceFactory(
            dag_run=run,
            task_id=f"t{i}",
            state=state,
            **({"hostname": "h", "pid": 1} if state == "running" else {}),
        )
        for i, state in enumerate(states)
    ]


def _finish(ti: TaskInstance, state: str, end: str = END) -> int:
    body: dict = {"state": state, "end_date": end}
    if state == "success":
        body.update(task_outlets=[], outlet_events=[])
    return client_for(ti).patch(state_url(ti), body, format="json").status_code


def _run_of(ti: TaskInstance) -> DagRun:
    return DagRun.objects.get(pk=ti.dag_run_id)


def test_first_task_instance_to_start_moves_its_queued_run_to_running():
    first, second = _run_with("queued", "queued", run_state=DagRunState.QUEUED)
    assert _run_of(first).start_date is None

    response = client_for(first).patch(
        f"/execution/task-instances/{first.pk}/run", RUN_BODY, format="json"
    )

    assert response.status_code == 200, response.content
    assert response.json()["dag_run"]["state"] == "running"
    run = _run_of(first)
    assert run.state == "running"
    assert run.start_date == datetime.fromisoformat(RUN_BODY["start_date"])
    # the second task instance starting leaves the run (and its start date) alone
    second_body = {**RUN_BODY, "start_date": "2026-11-30T05:00:00Z", "pid": 7}
    assert client_for(second).patch(
        f"/execution/task-instances/{second.pk}/run", second_body, format="json"
    ).json()["dag_run"]["start_date"] == RUN_BODY["start_date"].replace("+00:00", "Z")
    assert _run_of(second).start_date == run.start_date


@pytest.mark.parametrize(
    ("other", "last", "expected"),
    [
        pytest.param("success", "success", "success", id="all-success"),
        pytest.param("failed", "success", "failed", id="one-failed"),
        pytest.param("upstream_failed", "success", "failed", id="one-upstream-failed"),
        pytest.param("skipped", "skipped", "success", id="skipped-is-not-failure"),
        pytest.param("removed", "failed", "failed", id="last-failed"),
    ],
)
def test_run_ends_when_its_last_task_instance_finishes(other, last, expected):
    first, second = _run_with("running", "running")
    assert _finish(first, other) == 204
    run = _run_of(first)
    assert (run.state, run.end_date) == ("running", None)  # the other is still running

    before = timezone.now()
    assert _finish(second, last, end="2026-11-30T06:00:00Z") == 204

    run = _run_of(first)
    assert run.state == expected
    assert before <= run.end_date <= timezone.now()  # the server's clock, as in Airflow


def test_up_for_retry_does_not_end_the_run():
    [ti] = _run_with("running")
    ti.max_tries = 1
    ti.save()

    assert _finish(ti, "up_for_retry") == 204

    run = _run_of(ti)
    assert (run.state, run.end_date) == ("running", None)


def test_a_repeated_report_does_not_settle_the_run_again():
    [ti] = _run_with("running")
    assert _finish(ti, "success") == 204
    ended = _run_of(ti).end_date

    assert _finish(ti, "success", end="2026-12-01T00:00:00Z") == 200

    assert _run_of(ti).end_date == ended


def test_failed_query_count_is_pinned(django_assert_num_queries):
    # the UPDATE … RETURNING that checks, locks and finishes the TI (no transaction around it:
    # nothing else to write), then the run's conditional UPDATE (ends it: no task instance of
    # it unfinished); on PostgreSQL the two are one statement
    [ti] = _run_with("running")
    client = client_for(ti)

    with django_assert_num_queries(1 if connection.vendor == "postgresql" else 2):
        response = client.patch(state_url(ti), {"state": "failed", "end_date": END}, format="json")

    assert response.status_code == 204
    assert _run_of(ti).state == "failed"


def test_a_task_instance_created_running_starts_its_queued_run_which_then_settles():
    # given: a queued run (say the scheduler's) and a task instance an operator creates running
    run = DagRunFactory(dag=DagFactory(dag_id="d", task_ids=["t"]), state=DagRunState.QUEUED)
    created = task_instance_create(
        dag_id="d", task_id="t", run_id=run.run_id, state=TaskInstanceState.RUNNING
    )

    # when it finishes
    status = _finish(created.task_instance, "success")

    # then its run started with it and ended with it
    run.refresh_from_db()
    assert status == 204
    assert run.state == DagRunState.SUCCESS
    assert run.start_date is not None


def test_a_retried_report_settles_a_run_its_first_request_left_running(monkeypatch):
    # given: the first success report committed, then its settle failed (the process died);
    # on PostgreSQL its finishing statement did not end the run either (as when another
    # transaction held the run's row: it skips it)
    [ti] = _run_with("running")
    from assets_app.services.runs import state

    def settle_fails(**kwargs):
        raise ConnectionError("the server went away")

    def settles_nothing(**kwargs):
        return Statement("SELECT 1 WHERE false", [])

    monkeypatch.setattr(state, "dag_run_progress", settle_fails)
    monkeypatch.setattr(state, "dag_run_settle_step", settles_nothing)
    assert _finish(ti, "success") == 500
    monkeypatch.undo()
    assert (TaskInstance.objects.get(pk=ti.pk).state, _run_of(ti).state) == ("success", "running")

    # when the runner retries the report (as the task SDK does after an error)
    status = _finish(ti, "success")

    # then nothing is written twice (200: already in that state) and the run ends
    assert status == 200
    assert _run_of(ti).state == "success"


@pytest.mark.postgres
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_two_last_task_instances_finishing_at_once_settle_their_run_once(server):
    from tests.executionapi.test_concurrency import _patch_all

    # given 12 runs of two running task instances each (one run with a failure to come)
    pairs = [_run_with("running", "running") for _ in range(12)]
    requests = []
    for index, (first, second) in enumerate(pairs):
        requests.append((str(first.pk), {"state": "success", "end_date": END}))
        state = "failed" if index == 0 else "success"
        requests.append((str(second.pk), {"state": state, "end_date": END}))
    for _, body in requests:
        if body["state"] == "success":
            body.update(task_outlets=[], outlet_events=[])

    # when all 24 finish at the same moment through a real server (2 processes x 8 threads)
    before = timezone.now()
    codes = _patch_all(server, requests)

    # then every run ended (none left running because each saw the other still running)
    assert codes == [204] * 24, server.log()[-3000:]
    runs = [_run_of(first) for first, _ in pairs]
    assert [run.state for run in runs] == ["failed"] + ["success"] * 11
    assert all(before <= run.end_date <= timezone.now() for run in runs)


def test_settling_is_logged(caplog):
    [ti] = _run_with("running")
    with caplog.at_level(logging.INFO, logger="assets_app.services.runs.settle"):
        _finish(ti, "success")
    assert f"DAG run {ti.dag_run_id} finished" in caplog.text


def test_a_new_task_instance_in_a_finished_run_makes_it_running_again():
    from assets_app.services.runs.dag_runs import task_instance_create

    [ti] = _run_with("running")
    assert _finish(ti, "success") == 204
    assert _run_of(ti).state == "success"

    created = task_instance_create(dag_id="d", task_id="later", run_id=ti.run_id)

    assert created.created
    run = _run_of(ti)
    assert (run.state, run.end_date) == ("running", None)
