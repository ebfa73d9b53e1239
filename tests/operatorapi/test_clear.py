"""``POST /api/v1/dag-runs/{id}/clear``: the clearing service behind the operator API."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from assets_app.models import DagRun, TaskInstance, TaskInstanceHistory
from assets_app.tokens import token_issue
from tests.factories import DagFactory, DagRunFactory, TaskInstanceFactory
from tests.operatorapi.conftest import VIEW_PERMISSIONS

pytestmark = pytest.mark.django_db

API = "/api/v1"


@pytest.fixture
def clearer(client_for) -> APIClient:
    return client_for("clearer", *VIEW_PERMISSIONS, "change_taskinstance")


@pytest.fixture
def failed_run() -> DagRun:
    run = DagRunFactory(dag=DagFactory(dag_id="orders"), run_id="manual__1", state="failed")
    TaskInstanceFactory(dag_run=run, task_id="export", state="failed", try_number=1)
    TaskInstanceFactory(dag_run=run, task_id="load", state="success", try_number=1)
    return run


def states(run: DagRun) -> dict[str, tuple[str | None, int]]:
    return {
        ti.task_id: (ti.state, ti.try_number)
        for ti in TaskInstance.objects.filter(dag_run=run).order_by("task_id")
    }


def test_clearing_a_failed_run_schedules_its_task_instances_as_new_tries(clearer, failed_run):
    # given
    old_ids = set(TaskInstance.objects.values_list("pk", flat=True))

    # when
    response = clearer.post(f"{API}/dag-runs/{failed_run.pk}/clear", {}, format="json")

    # then
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["dry_run"] is False
    assert [
        (c["task_instance"], c["previous_state"], c["try_number"]) for c in body["cleared"]
    ] == [
        ("orders.export @ manual__1", "failed", 2),
        ("orders.load @ manual__1", "success", 2),
    ]
    assert body["runs_requeued"] == [str(failed_run)]
    assert states(failed_run) == {"export": ("scheduled", 2), "load": ("scheduled", 2)}
    assert not old_ids & set(TaskInstance.objects.values_list("pk", flat=True))  # new ids
    assert TaskInstanceHistory.objects.count() == 2
    failed_run.refresh_from_db()
    assert (failed_run.state, failed_run.end_date) == (
        "running",
        None,
    )  # queued again, then started: its DAG has room


def test_only_failed_and_task_ids_narrow_the_selection(clearer, failed_run):
    response = clearer.post(
        f"{API}/dag-runs/{failed_run.pk}/clear",
        {"only_failed": True, "task_ids": ["export", "load"]},
        format="json",
    )

    assert response.status_code == 200, response.content
    assert [c["task_instance"] for c in response.json()["cleared"]] == ["orders.export @ manual__1"]
    assert states(failed_run) == {"export": ("scheduled", 2), "load": ("success", 1)}


def test_a_dry_run_changes_nothing(clearer, failed_run):
    response = clearer.post(
        f"{API}/dag-runs/{failed_run.pk}/clear", {"dry_run": True}, format="json"
    )

    assert response.status_code == 200, response.content
    assert response.json()["dry_run"] is True
    assert len(response.json()["cleared"]) == 2
    assert states(failed_run) == {"export": ("failed", 1), "load": ("success", 1)}
    assert not TaskInstanceHistory.objects.exists()


def test_a_running_task_instance_refuses_the_clear_and_nothing_is_written(clearer, failed_run):
    TaskInstanceFactory(dag_run=failed_run, task_id="report", state="running")

    response = clearer.post(f"{API}/dag-runs/{failed_run.pk}/clear", {}, format="json")

    assert response.status_code == 409, response.content
    assert response.json()["code"] == "clear_refused"
    assert "orders.report @ manual__1" in response.json()["detail"]
    assert states(failed_run) == {
        "export": ("failed", 1),
        "load": ("success", 1),
        "report": ("running", 1),
    }


@pytest.mark.parametrize(
    ("body", "field"),
    [
        pytest.param({"only_failed": "yes"}, "only_failed", id="not-a-boolean"),
        pytest.param({"task_ids": "export"}, "task_ids", id="not-a-list"),
        pytest.param({"task_ids": [""]}, "task_ids", id="empty-task-id"),
        pytest.param({"force": True}, "force", id="unknown-field"),
    ],
)
def test_bad_input_is_400_naming_the_field(clearer, failed_run, body, field):
    response = clearer.post(f"{API}/dag-runs/{failed_run.pk}/clear", body, format="json")

    assert response.status_code == 400, response.content
    assert field in json_text(response)
    assert states(failed_run) == {"export": ("failed", 1), "load": ("success", 1)}


def json_text(response) -> str:
    return response.content.decode()


def test_an_unknown_run_is_404(clearer):
    assert clearer.post(f"{API}/dag-runs/999/clear", {}, format="json").status_code == 404


def test_clearing_needs_the_change_task_instance_permission(client_for, failed_run):
    viewer = client_for("viewer", *VIEW_PERMISSIONS)

    response = viewer.post(f"{API}/dag-runs/{failed_run.pk}/clear", {}, format="json")

    assert response.status_code == 403
    assert "assets_app.change_taskinstance" in response.json()["detail"]
    assert states(failed_run) == {"export": ("failed", 1), "load": ("success", 1)}


def test_anonymous_and_runner_tokens_cannot_clear(failed_run):
    ti = TaskInstance.objects.get(task_id="export")
    anonymous = APIClient()
    runner = APIClient()
    runner.credentials(HTTP_AUTHORIZATION=f"Bearer {token_issue(task_instance_id=ti.pk)}")

    for client in (anonymous, runner):
        response = client.post(f"{API}/dag-runs/{failed_run.pk}/clear", {}, format="json")
        assert response.status_code == 401, response.content
    assert states(failed_run) == {"export": ("failed", 1), "load": ("success", 1)}
