"""Every failed try keeps why it failed (issue 41 item 7): a runner that says nothing (the
execution API's ``failed`` patch has no reason field; Airflow's runner sends no
``retry_reason``) gets the worker's reason from the try's log, on the task instance while it
is ``failed``, else on the history row its retry left behind."""

from __future__ import annotations

import pytest
from django.utils import timezone

from assets_app.models import TaskInstance, TaskInstanceHistory, TaskInstanceState
from assets_app.services.runs.state import task_instance_failure_reason_record
from assets_app.services.runs.tries import task_instance_next_try
from assets_app.services.secrets.variables import variable_set
from tests.factories import TaskInstanceFactory

pytestmark = pytest.mark.django_db


def test_a_failed_task_instance_without_a_reason_gets_it_masked():
    variable_set(key="warehouse_password", value="s3cr3t-pa55word")
    ti = TaskInstanceFactory(state=TaskInstanceState.FAILED, failure_reason="")

    kept = task_instance_failure_reason_record(
        task_instance_id=ti.pk, reason="OperationalError: login failed for s3cr3t-pa55word"
    )

    assert kept
    ti.refresh_from_db()
    assert ti.failure_reason == "OperationalError: login failed for ***"


def test_a_reason_already_kept_stays():
    ti = TaskInstanceFactory(state=TaskInstanceState.FAILED, failure_reason="heartbeat timeout")

    assert not task_instance_failure_reason_record(task_instance_id=ti.pk, reason="exit code 1")

    ti.refresh_from_db()
    assert ti.failure_reason == "heartbeat timeout"


def test_a_try_that_went_up_for_retry_keeps_the_reason_on_its_history_row():
    ti = TaskInstanceFactory(state=TaskInstanceState.RUNNING, max_tries=2, try_number=1)
    first_try = ti.pk
    task_instance_next_try(ti, end_date=timezone.now())  # no retry_reason from the runner

    kept = task_instance_failure_reason_record(
        task_instance_id=first_try, reason="KeyError: 'customer_id'"
    )

    assert kept
    history = TaskInstanceHistory.objects.get(task_instance_id=first_try)
    assert (history.state, history.failure_reason) == ("failed", "KeyError: 'customer_id'")
    # the live task instance (the next try) is left alone
    assert TaskInstance.objects.get(pk=ti.pk).failure_reason == ""


def test_a_task_instance_not_failed_is_left_alone():
    ti = TaskInstanceFactory(state=TaskInstanceState.SUCCESS)

    assert not task_instance_failure_reason_record(task_instance_id=ti.pk, reason="exit code 1")
    ti.refresh_from_db()
    assert ti.failure_reason == ""
