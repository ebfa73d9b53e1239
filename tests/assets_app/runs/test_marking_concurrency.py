"""Marking a run while its runner reports (PostgreSQL): the runner's finish waits on the task
instance the marking locked, then finds it no longer running and changes nothing; the run
keeps the state it was marked with."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from assets_app.exceptions import TaskInstanceInvalidStateError
from assets_app.models import DagRun, TaskInstance
from assets_app.services.runs import marking
from assets_app.services.runs.state import SuccessPayload, task_instance_state_update
from tests.factories import DagRunFactory, TaskInstanceFactory

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_a_runner_finishing_while_the_run_is_marked_waits_and_is_refused(
    monkeypatch, await_lock_wait
):
    # given a running task instance, and a marking that holds its locks until released
    run = DagRunFactory(state="running", start_date=timezone.now())
    ti = TaskInstanceFactory(dag_run=run, task_id="t", state="running", start_date=run.start_date)
    locked, release = threading.Event(), threading.Event()
    real_finish = marking._finish

    def finish_then_hold(*args: Any, **kwargs: Any) -> Any:
        marked = real_finish(*args, **kwargs)
        locked.set()
        assert release.wait(timeout=30)
        return marked

    monkeypatch.setattr(marking, "_finish", finish_then_hold)
    outcome: dict[str, Any] = {}

    def mark() -> None:
        try:
            marking.dag_run_mark(dag_id=run.dag_id, run_id=run.run_id, state="failed")
        finally:
            connection.close()

    def report() -> None:
        try:
            task_instance_state_update(
                task_instance_id=ti.pk,
                payload=SuccessPayload(end_date=timezone.now()),
            )
        except TaskInstanceInvalidStateError as exc:
            outcome["refused"] = exc
        finally:
            connection.close()

    marker = threading.Thread(target=mark)
    marker.start()
    assert locked.wait(timeout=10)
    runner = threading.Thread(target=report)
    runner.start()

    # when: the runner's finishing UPDATE meets the locked task instance, it waits ...
    try:
        assert await_lock_wait(query_like="%UPDATE task_instance%") == 1
    finally:
        release.set()
        marker.join(timeout=30)
    runner.join(timeout=30)

    # then: ... and, once the marking committed, is refused (409): nothing it sent is kept
    assert "refused" in outcome
    assert TaskInstance.objects.get(pk=ti.pk).state == "failed"
    assert DagRun.objects.get(pk=run.pk).state == "failed"
