"""Who or what made a run (issue 40): ``triggered_by`` and ``triggering_user_name`` as Airflow
3 records them, from every face that makes runs, shown by both APIs and the admin."""

from __future__ import annotations

import getpass
from datetime import UTC, datetime
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from assets_app.models import AssetDagRunQueue, DagRun, DagTask
from assets_app.services.scheduling.scheduler import scheduler_pass
from assets_app.services.scheduling.time_schedules import dags_time_scheduled_runs_create
from publicapi.auth import user_token_issue
from tests.executionapi.conftest import client_for
from tests.factories import (
    AssetEventFactory,
    AssetFactory,
    DagFactory,
    DagRunFactory,
    TaskInstanceFactory,
)
from tests.operatorapi.conftest import make_user, token_client
from tests.publicapi.conftest import Api

pytestmark = pytest.mark.django_db

DAG_ID = "warehouse_orders_daily_rollup_v2"


@pytest.fixture
def dag():
    dag = DagFactory(dag_id=DAG_ID, task_ids=["rollup"], tags=["orders"])
    DagTask.objects.create(dag=dag, task_id="rollup")
    return dag


def _made() -> tuple[str | None, str | None]:
    run = DagRun.objects.filter(dag_id=DAG_ID).latest("created_at")
    return run.triggered_by, run.triggering_user_name


def test_the_cli_records_cli_and_the_os_user(dag):
    call_command("trigger_dag", DAG_ID, stdout=StringIO())

    assert _made() == ("cli", getpass.getuser())


def test_the_admin_records_ui_and_the_user(dag, admin_client, admin_user):
    url = reverse("admin:assets_app_dag_do", args=[DAG_ID, "trigger"])
    admin_client.post(url, follow=True)

    assert _made() == ("ui", admin_user.get_username())
    run = DagRun.objects.get(dag_id=DAG_ID)
    page = admin_client.get(reverse("admin:assets_app_dagrun_change", args=[run.pk]))
    assert f"the admin ({admin_user.get_username()})" in page.content.decode()


def test_the_operator_api_records_rest_api_and_the_user(dag):
    api = token_client(make_user("ops.lead", "view_dag", "add_dagrun"))

    response = api.post(f"/api/v1/dags/{DAG_ID}/runs", {}, format="json")

    assert response.status_code == 201, response.content
    assert (response.json()["triggered_by"], response.json()["triggering_user_name"]) == (
        "rest_api",
        "ops.lead",
    )
    assert _made() == ("rest_api", "ops.lead")


def test_airflows_api_records_rest_api_and_the_user(dag):
    admin = User.objects.create_superuser("admin", "admin@example.com", "pw")
    admin_api = Api(user_token_issue(user=admin))

    response = admin_api.post(f"dags/{DAG_ID}/dagRuns", {"logical_date": None})

    assert response.status_code == 200, response.content
    assert response.json()["triggered_by"] == "rest_api"
    assert response.json()["triggering_user_name"] == "admin"
    assert _made() == ("rest_api", "admin")


def test_a_task_operator_records_operator_and_inherits_the_person(dag):
    parent_run = DagRunFactory(
        dag=DagFactory(dag_id="controller"), triggered_by="ui", triggering_user_name="ana"
    )
    ti = TaskInstanceFactory(dag_run=parent_run, task_id="trigger", state="running")

    response = client_for(ti).post(
        f"/execution/dag-runs/{DAG_ID}/manual__2026-01-03T00:00:00+00:00", {}, format="json"
    )

    assert response.status_code == 204, response.content
    assert _made() == ("operator", "ana")


def test_the_scheduler_records_asset_and_timetable(dag):
    asset = AssetFactory(name="orders", uri="s3://lake/orders")
    DagFactory(
        dag_id="customer_360",
        task_ids=["refresh"],
        asset_expression={"asset": {"name": "orders", "uri": "s3://lake/orders"}},
    )
    AssetEventFactory(asset=asset)
    AssetDagRunQueue.objects.create(asset=asset, target_dag_id="customer_360")
    scheduler_pass()
    assert DagRun.objects.get(dag_id="customer_360").triggered_by == "asset"

    DagFactory(
        dag_id="nightly_export",
        task_ids=["export"],
        timetable={"cron": "0 0 * * *", "timezone": "UTC"},
        timetable_summary="@daily",
        next_dagrun=datetime(2026, 1, 1, tzinfo=UTC),
        next_dagrun_create_after=datetime(2026, 1, 1, tzinfo=UTC),
    )
    dags_time_scheduled_runs_create(now=timezone.now())
    assert DagRun.objects.get(dag_id="nightly_export").triggered_by == "timetable"
