"""The admin's view of the run lifecycle: failure reasons, earlier tries, the clear actions."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

from assets_app.models import DagRun, TaskInstance, TaskInstanceHistory
from assets_app.services.runs.tries import task_instance_history_record
from tests.assets_app.admin import change, changelist
from tests.factories import DagFactory, DagRunFactory, TaskInstanceFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def failed_run() -> DagRun:
    run = DagRunFactory(dag=DagFactory(dag_id="d"), run_id="manual__1", state="failed")
    ti = TaskInstanceFactory(
        dag_run=run,
        task_id="t",
        state="failed",
        try_number=2,
        failure_reason="heartbeat timeout: no heartbeat for more than 300 s from h pid 1",
    )
    earlier = task_instance_history_record(ti)
    earlier.task_instance_id = "0195e0b8-0000-7000-8000-00000000abcd"
    earlier.try_number, earlier.failure_reason = 1, "the first try broke"
    earlier.save()
    return run


def _messages(response) -> list[str]:
    return [str(m) for m in response.context["messages"]]


def test_task_instance_page_shows_its_failure_reason_and_earlier_tries(admin_client, failed_run):
    ti = TaskInstance.objects.get()

    content = admin_client.get(change("taskinstance", ti.pk)).content.decode()

    assert "heartbeat timeout: no heartbeat for more than 300 s from h pid 1" in content
    assert "earlier tries" in content.lower()
    assert "the first try broke" in content
    assert "0195e0b8-0000-7000-8000-00000000abcd" in content


def test_run_page_shows_state_end_date_and_failure_reasons(admin_client, failed_run):
    content = admin_client.get(change("dagrun", failed_run.pk)).content.decode()
    assert "heartbeat timeout" in content
    assert "ar-badge-bad ar-state-is-failed" in content  # the state, a red badge


def test_clear_action_on_task_instances(admin_client, failed_run):
    ti = TaskInstance.objects.get()

    response = admin_client.post(
        changelist("taskinstance"),
        {"action": "clear_task_instances", "_selected_action": [str(ti.pk)]},
        follow=True,
    )

    assert _messages(response) == [
        "Cleared 1 task instance(s), scheduled as new tries: d.t @ manual__1 (try 3); "
        "1 run(s) back to queued; 0 unfinished task instance(s) left alone."
    ]
    cleared = TaskInstance.objects.get()
    assert (cleared.state, cleared.try_number) == ("scheduled", 3)
    assert DagRun.objects.get().state == "running"  # queued again, and started: room to run
    assert TaskInstanceHistory.objects.count() == 2


def test_clear_action_refuses_a_running_task_instance(admin_client, failed_run):
    running = TaskInstanceFactory(dag_run=failed_run, task_id="u", state="running")

    response = admin_client.post(
        changelist("dagrun"),
        {"action": "clear_runs", "_selected_action": [str(failed_run.pk)]},
        follow=True,
    )

    assert _messages(response) == [
        "Nothing cleared: cannot clear running task instance(s): d.u @ manual__1; wait until "
        "they finish (or are reaped), or narrow the selection (--task-id, --only-failed)"
    ]
    assert TaskInstance.objects.get(pk=running.pk).state == "running"
    assert TaskInstance.objects.get(task_id="t").state == "failed"


def test_clear_failed_action_on_runs_skips_the_running_one(admin_client, failed_run):
    TaskInstanceFactory(dag_run=failed_run, task_id="u", state="running")

    response = admin_client.post(
        changelist("dagrun"),
        {"action": "clear_failed_of_runs", "_selected_action": [str(failed_run.pk)]},
        follow=True,
    )

    assert _messages(response)[0].startswith("Cleared 1 task instance(s)")
    assert TaskInstance.objects.get(task_id="t").state == "scheduled"


def test_clear_actions_need_the_change_permission(client, failed_run):
    user = get_user_model().objects.create_user("viewer", password="pw", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=["view_taskinstance"]))
    client.force_login(user)

    response = client.get(changelist("taskinstance"))

    assert response.status_code == 200
    assert "clear_task_instances" not in response.content.decode()
