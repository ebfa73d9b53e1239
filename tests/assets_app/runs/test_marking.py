"""Marking a DAG run (``assets_app.services.runs.marking``), table-tested from Airflow's
``api/common/mark_tasks.py``: what each task instance state becomes, and the run's state and
dates, for success, failed and queued."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from assets_app.exceptions import DagRunNotFoundError, InvalidInputError
from assets_app.models import Dag, DagRun, DagRunNote, TaskInstance, TaskInstanceState
from assets_app.services.runs.admit import dag_runs_admit
from assets_app.services.runs.marking import dag_run_mark
from assets_app.services.runs.state import TerminalPayload, task_instance_state_update
from tests.factories import DagFactory, DagRunFactory, TaskInstanceFactory

pytestmark = pytest.mark.django_db

#: Airflow's ``_set_dag_run_terminal_state``: running states take the run's state, the other
#: unfinished ones are skipped, finished ones keep theirs.
TERMINAL = [
    ("running", "success", "success"),
    ("deferred", "success", "success"),
    ("up_for_reschedule", "success", "success"),
    ("scheduled", "success", "skipped"),
    ("queued", "success", "skipped"),
    ("up_for_retry", "success", "skipped"),
    ("restarting", "success", "skipped"),
    (None, "success", "skipped"),
    ("failed", "success", "failed"),
    ("upstream_failed", "success", "upstream_failed"),
    ("skipped", "success", "skipped"),
    ("success", "failed", "success"),
    ("running", "failed", "failed"),
    ("queued", "failed", "skipped"),
    ("removed", "failed", "removed"),
]


@pytest.mark.parametrize(
    ("before", "mark", "after"),
    [pytest.param(b, m, a, id=f"{b}-marked-{m}") for b, m, a in TERMINAL],
)
def test_marking_a_run_success_or_failed_sets_its_unfinished_task_instances(before, mark, after):
    # given
    run = DagRunFactory(state="running", start_date=timezone.now() - timedelta(minutes=5))
    started = timezone.now() - timedelta(minutes=1) if before == "running" else None
    ti = TaskInstanceFactory(dag_run=run, task_id="t", state=before, start_date=started)
    # when
    result = dag_run_mark(dag_id=run.dag_id, run_id=run.run_id, state=mark)
    # then
    ti.refresh_from_db()
    assert ti.state == after
    assert result.dag_run.state == mark
    assert result.dag_run.end_date is not None
    if after != before:
        assert [(m.previous_state, m.state) for m in result.task_instances] == [(before, after)]
        assert ti.end_date is not None
        assert ti.start_date is not None
        assert ti.duration == (ti.end_date - ti.start_date).total_seconds()
        if before == "running":
            assert ti.start_date == started
    else:
        assert result.task_instances == []


def test_a_run_already_in_the_state_keeps_its_end_date():
    ended = timezone.now() - timedelta(hours=1)
    run = DagRunFactory(state="success", end_date=ended)
    TaskInstanceFactory(dag_run=run, state="success")
    result = dag_run_mark(dag_id=run.dag_id, run_id=run.run_id, state="success")
    assert result.dag_run.end_date == ended


def test_a_runner_reporting_on_a_marked_task_instance_is_refused():
    from assets_app.exceptions import TaskInstanceNotRunningError
    from assets_app.services.runs.claims import task_instance_heartbeat

    run = DagRunFactory(state="running")
    ti = TaskInstanceFactory(dag_run=run, state="running", hostname="h", pid=7)
    dag_run_mark(dag_id=run.dag_id, run_id=run.run_id, state="failed")
    with pytest.raises(TaskInstanceNotRunningError):
        task_instance_heartbeat(task_instance_id=ti.pk, hostname="h", pid=7)


def test_queued_is_admitted_again_at_once_when_its_dag_has_room():
    # given a failed run with a task instance still to run
    run = DagRunFactory(state="failed", start_date=timezone.now(), end_date=timezone.now())
    TaskInstanceFactory(dag_run=run, task_id="done", state="failed")
    waiting = TaskInstanceFactory(dag_run=run, task_id="next", state="scheduled")
    # when
    result = dag_run_mark(dag_id=run.dag_id, run_id=run.run_id, state="queued")
    # then it runs again (admitted after the commit, as after a clear), its tasks left alone
    assert result.dag_run.state == "running"
    assert result.dag_run.start_date is not None
    assert result.dag_run.end_date is None
    assert TaskInstance.objects.get(pk=waiting.pk).state == "scheduled"


def test_queued_waits_without_dates_while_its_dag_is_paused():
    run = DagRunFactory(dag=DagFactory(is_paused=True), state="success", start_date=timezone.now())
    TaskInstanceFactory(dag_run=run, state="scheduled")
    result = dag_run_mark(dag_id=run.dag_id, run_id=run.run_id, state="queued")
    assert (result.dag_run.state, result.dag_run.start_date, result.dag_run.end_date) == (
        "queued",
        None,
        None,
    )
    Dag.objects.filter(pk=run.dag_id).update(is_paused=False)
    assert dag_runs_admit(dag_ids=[run.dag_id]) == [run.pk]  # the scheduler's next pass


@pytest.mark.parametrize(
    ("states", "settles_to"),
    [
        pytest.param(["success", "skipped"], "success", id="all-succeeded"),
        pytest.param(["success", "failed"], "failed", id="one-failed"),
    ],
)
def test_queued_with_nothing_left_to_run_settles_at_once(states, settles_to):
    # given a finished run: none of its task instances will run again
    run = DagRunFactory(state="success" if settles_to == "failed" else "failed")
    for n, state in enumerate(states):
        TaskInstanceFactory(dag_run=run, task_id=f"t{n}", state=state)
    # when
    result = dag_run_mark(dag_id=run.dag_id, run_id=run.run_id, state="queued")
    # then it was admitted and ended as its task instances say, instead of waiting for ever
    assert result.dag_run.state == settles_to
    assert result.dag_run.start_date is not None
    assert result.dag_run.end_date is not None


def test_queued_with_a_task_instance_running_settles_when_it_ends():
    run = DagRunFactory(state="success")
    ti = TaskInstanceFactory(dag_run=run, state="running", start_date=timezone.now())
    result = dag_run_mark(dag_id=run.dag_id, run_id=run.run_id, state="queued")
    assert result.dag_run.state == "running"
    task_instance_state_update(
        task_instance_id=ti.pk,
        payload=TerminalPayload(state=TaskInstanceState.FAILED, end_date=timezone.now()),
    )
    assert DagRun.objects.get(pk=run.pk).state == "failed"


def test_a_note_is_written_cleared_and_kept():
    run = DagRunFactory(state="success")
    dag_run_mark(dag_id=run.dag_id, run_id=run.run_id, note="looked at it", user_id="7")
    assert DagRunNote.objects.get(dag_run=run).content == "looked at it"
    dag_run_mark(dag_id=run.dag_id, run_id=run.run_id, state="failed")  # note kept
    assert DagRunNote.objects.get(dag_run=run).content == "looked at it"
    dag_run_mark(dag_id=run.dag_id, run_id=run.run_id, note=None, user_id="8")
    note = DagRunNote.objects.get(dag_run=run)
    assert (note.content, note.user_id) == (None, "8")


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        pytest.param({"state": "running"}, "state", id="not-markable"),
        pytest.param({"note": "x" * 1001}, "note", id="note-too-long"),
        pytest.param({"note": "a\x00b"}, "note", id="note-nul"),
    ],
)
def test_bad_input_names_the_field_and_writes_nothing(kwargs, field):
    run = DagRunFactory(state="failed")
    with pytest.raises(InvalidInputError) as raised:
        dag_run_mark(dag_id=run.dag_id, run_id=run.run_id, **kwargs)
    assert raised.value.context["field"] == field
    assert DagRun.objects.get(pk=run.pk).state == "failed"
    assert not DagRunNote.objects.exists()


def test_an_unknown_run_is_not_found():
    with pytest.raises(DagRunNotFoundError):
        dag_run_mark(dag_id="nope", run_id="nope", state="success")
