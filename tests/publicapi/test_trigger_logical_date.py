"""``logical_date: null`` on ``/api/v2`` trigger and materialize stays null, as in Airflow 3.3:
no logical date, no data interval, ``run_after`` now (or the body's), run id
``manual__<run_after ISO>``; an explicit logical date still dates the run. The faces that
keep today's behaviour (``dag_run_trigger``'s default ``NOW``) still date the run now."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.utils import timezone

from assets_app.models import DagRun, TaskOutletAssetReference
from assets_app.services.runs.dag_runs import dag_run_trigger
from tests.factories import AssetFactory, DagFactory

pytestmark = pytest.mark.django_db

AT = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)


def test_a_null_logical_date_is_kept_null_with_airflows_run_id(admin_api):
    DagFactory(dag_id="d", task_ids=["t"])
    before = timezone.now()

    response = admin_api.post("dags/d/dagRuns", {"logical_date": None})

    assert response.status_code == 200, response.json()
    body = response.json()
    run = DagRun.objects.get(dag_id="d")
    assert run.logical_date is None
    assert (run.data_interval_start, run.data_interval_end) == (None, None)
    assert before <= run.run_after <= timezone.now()
    assert run.run_id == f"manual__{run.run_after.isoformat()}"
    assert body["dag_run_id"] == run.run_id
    assert body["logical_date"] is None
    assert body["data_interval_start"] is None
    assert body["data_interval_end"] is None
    assert run.task_instances.count() == 1


def test_a_null_logical_date_with_a_run_after_names_the_run_after_it(admin_api):
    DagFactory(dag_id="d", task_ids=["t"])

    response = admin_api.post(
        "dags/d/dagRuns",
        {
            "logical_date": None,
            "run_after": AT.isoformat(),
            "data_interval_start": "2026-01-01T00:00:00Z",
            "data_interval_end": "2026-01-02T00:00:00Z",
        },
    )

    assert response.status_code == 200, response.json()
    run = DagRun.objects.get(dag_id="d")
    assert (run.run_id, run.run_after, run.logical_date) == (
        "manual__2026-03-04T05:06:07+00:00",
        AT,
        None,
    )
    # Airflow infers no data interval without a logical date
    assert (run.data_interval_start, run.data_interval_end) == (None, None)


def test_two_null_logical_date_runs_are_two_runs(admin_api):
    DagFactory(dag_id="d", task_ids=["t"])

    first = admin_api.post("dags/d/dagRuns", {"logical_date": None})
    second = admin_api.post("dags/d/dagRuns", {"logical_date": None})

    assert (first.status_code, second.status_code) == (200, 200)
    assert DagRun.objects.filter(dag_id="d", logical_date__isnull=True).count() == 2
    listed = admin_api.get("dags/d/dagRuns", {"order_by": "-run_after"}).json()
    assert [r["dag_run_id"] for r in listed["dag_runs"]] == [
        second.json()["dag_run_id"],
        first.json()["dag_run_id"],
    ]


def test_an_explicit_logical_date_still_dates_the_run(admin_api):
    DagFactory(dag_id="d", task_ids=["t"])

    response = admin_api.post("dags/d/dagRuns", {"logical_date": AT.isoformat()})

    assert response.status_code == 200, response.json()
    run = DagRun.objects.get(dag_id="d")
    assert (run.logical_date, run.data_interval_start, run.data_interval_end) == (AT, AT, AT)
    assert run.run_id == "manual__2026-03-04T05:06:07+00:00"
    assert response.json()["logical_date"] == "2026-03-04T05:06:07Z"


def test_a_data_interval_is_both_ends_or_none_as_airflows_body(admin_api):
    DagFactory(dag_id="warehouse_orders_daily_export", task_ids=["extract"])

    for one_end in ("data_interval_start", "data_interval_end"):
        response = admin_api.post(
            "dags/warehouse_orders_daily_export/dagRuns",
            {"logical_date": AT.isoformat(), one_end: AT.isoformat()},
        )
        assert response.status_code == 422, response.json()
        (error,) = response.json()["detail"]
        assert error["loc"] == ["body"]
        assert "Either both data_interval_start and data_interval_end" in error["msg"]
    assert not DagRun.objects.exists()

    end = AT.replace(day=5)
    response = admin_api.post(
        "dags/warehouse_orders_daily_export/dagRuns",
        {
            "logical_date": AT.isoformat(),
            "data_interval_start": AT.isoformat(),
            "data_interval_end": end.isoformat(),
        },
    )
    assert response.status_code == 200, response.json()
    run = DagRun.objects.get()
    assert (run.data_interval_start, run.data_interval_end) == (AT, end)


def test_the_triggers_note_is_the_new_runs_as_airflow_keeps_it(admin_api):
    DagFactory(dag_id="warehouse_orders_daily_export", task_ids=["extract"])

    response = admin_api.post(
        "dags/warehouse_orders_daily_export/dagRuns",
        {"logical_date": None, "note": "re-run after the warehouse outage", "conf": {"day": 3}},
    )

    assert response.status_code == 200, response.json()
    assert response.json()["note"] == "re-run after the warehouse outage"
    run = DagRun.objects.get()
    assert run.dag_run_note.content == "re-run after the warehouse outage"
    assert run.dag_run_note.user_id is not None
    too_long = admin_api.post(
        "dags/warehouse_orders_daily_export/dagRuns", {"logical_date": None, "note": "x" * 1001}
    )
    assert too_long.status_code == 422, too_long.json()
    assert DagRun.objects.count() == 1


def test_materialize_makes_a_run_without_a_logical_date(admin_api):
    asset = AssetFactory()
    producer = DagFactory(dag_id="producer", task_ids=["make"])
    TaskOutletAssetReference.objects.create(asset=asset, dag=producer, task_id="make")

    response = admin_api.post(f"assets/{asset.pk}/materialize", b"")

    assert response.status_code == 200, response.json()
    run = DagRun.objects.get(dag_id="producer")
    assert run.logical_date is None
    assert run.run_id == f"manual__{run.run_after.isoformat()}"
    assert response.json()["logical_date"] is None


def test_the_service_default_still_dates_the_run_now():
    DagFactory(dag_id="d", task_ids=["t"])
    before = timezone.now()

    run = dag_run_trigger(dag_id="d")

    assert run.logical_date is not None
    assert before <= run.logical_date <= timezone.now()
    assert run.data_interval_start == run.logical_date == run.data_interval_end
    assert run.run_id == f"manual__{run.logical_date.isoformat()}"
    assert dag_run_trigger(dag_id="d", run_id="none", logical_date=None).logical_date is None


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_airflows_client_triggers_without_a_logical_date_and_parses_the_run(server):
    from airflow_client.client.api.dag_run_api import DagRunApi
    from airflow_client.client.models.trigger_dag_run_post_body import TriggerDAGRunPostBody
    from django.contrib.auth.models import User

    from tests.publicapi.test_airflow_client import api_client, login

    DagFactory(dag_id="d", task_ids=["t"])
    User.objects.create_superuser("ops", "ops@example.com", "s3cret")
    runs = DagRunApi(api_client(server.url, login(server.url, "ops", "s3cret")))

    triggered = runs.trigger_dag_run("d", TriggerDAGRunPostBody(logical_date=None))
    dated = runs.trigger_dag_run("d", TriggerDAGRunPostBody(logical_date=AT))

    assert triggered.logical_date is None
    assert triggered.data_interval_start is None
    assert triggered.dag_run_id == f"manual__{triggered.run_after.isoformat()}"
    assert dated.logical_date == AT
    assert dated.dag_run_id == "manual__2026-03-04T05:06:07+00:00"
    fetched = runs.get_dag_run("d", triggered.dag_run_id)
    assert (fetched.dag_run_id, fetched.logical_date) == (triggered.dag_run_id, None)


def test_the_admin_shows_a_run_without_a_logical_date(admin_client):
    from django.urls import reverse

    DagFactory(dag_id="d", task_ids=["t"])
    run = dag_run_trigger(dag_id="d", logical_date=None)

    listed = admin_client.get(reverse("admin:assets_app_dagrun_changelist"))
    one = admin_client.get(reverse("admin:assets_app_dagrun_change", args=[run.pk]))

    assert (listed.status_code, one.status_code) == (200, 200)
    assert run.run_id in listed.content.decode()
