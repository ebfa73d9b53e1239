"""/assets/by-alias, /task-instances/{id}/previous-successful-dagrun and
/task-reschedules/{id}/start_date, with a reschedule recorded by the state PATCH."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from assets_app.models import AssetAliasAsset, TaskReschedule
from tests.executionapi.conftest import client_for, state_url
from tests.factories import AssetAliasFactory, AssetFactory, DagFactory, DagRunFactory

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_assets_by_alias_lists_the_resolved_assets(make_ti):
    ti = make_ti()
    alias = AssetAliasFactory(name="my_alias")
    for name in ("b_asset", "a_asset"):
        AssetAliasAsset.objects.create(
            alias=alias, asset=AssetFactory(name=name, uri=f"s3://{name}")
        )
    AssetFactory(name="unrelated", uri="s3://unrelated")

    response = client_for(ti).get("/execution/assets/by-alias", {"alias_name": "my_alias"})

    assert response.status_code == 200, response.content
    assert [(a["name"], a["uri"]) for a in response.json()] == [
        ("a_asset", "s3://a_asset"),
        ("b_asset", "s3://b_asset"),
    ]
    unknown = client_for(ti).get("/execution/assets/by-alias", {"alias_name": "nope"})
    assert (unknown.status_code, unknown.json()) == (200, [])


def test_assets_by_alias_without_alias_name_is_a_422_naming_it(make_ti):
    response = client_for(make_ti()).get("/execution/assets/by-alias")

    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["query", "alias_name"]


def test_assets_by_alias_needs_a_token():
    assert (
        __import__("rest_framework.test")
        .test.APIClient()
        .get("/execution/assets/by-alias", {"alias_name": "x"})
        .status_code
        == 401
    )


def test_previous_successful_dagrun_is_the_latest_earlier_success(make_ti):
    dag = DagFactory(dag_id="producer")
    for days, state in ((1, "success"), (2, "success"), (3, "failed")):
        DagRunFactory(
            dag=dag,
            logical_date=T0 + timedelta(days=days),
            state=state,
            start_date=T0 + timedelta(days=days, hours=1),
            end_date=T0 + timedelta(days=days, hours=2),
            data_interval_start=T0 + timedelta(days=days - 1),
            data_interval_end=T0 + timedelta(days=days),
        )
    ti = make_ti(dag_run=DagRunFactory(dag=dag, logical_date=T0 + timedelta(days=4)))

    response = client_for(ti).get(f"/execution/task-instances/{ti.pk}/previous-successful-dagrun")

    assert response.status_code == 200, response.content
    assert response.json() == {
        "data_interval_start": "2026-01-02T00:00:00Z",
        "data_interval_end": "2026-01-03T00:00:00Z",
        "start_date": "2026-01-03T01:00:00Z",
        "end_date": "2026-01-03T02:00:00Z",
    }


def test_previous_successful_dagrun_is_all_nulls_without_one(make_ti):
    ti = make_ti()  # a run with no logical date

    response = client_for(ti).get(f"/execution/task-instances/{ti.pk}/previous-successful-dagrun")

    assert response.status_code == 200
    assert set(response.json().values()) == {None}


def test_another_task_instances_routes_are_refused(make_ti):
    ti, other = make_ti(), make_ti(task_id="other")

    for url in (
        f"/execution/task-instances/{other.pk}/previous-successful-dagrun",
        f"/execution/task-reschedules/{other.pk}/start_date",
    ):
        response = client_for(ti).get(url)
        assert response.status_code == 403, url
        assert response.json()["detail"]["reason"] == "access_denied"


def test_a_reschedule_is_recorded_and_its_first_start_date_served(make_ti):
    ti = make_ti()
    url = f"/execution/task-reschedules/{ti.pk}/start_date"
    assert client_for(ti).get(url).json() is None

    body = {
        "state": "up_for_reschedule",
        "reschedule_date": "2026-11-30T05:00:00Z",
        "end_date": "2026-11-30T04:59:00Z",
    }
    patched = client_for(ti).patch(state_url(ti), body, format="json")

    assert patched.status_code == 204, patched.content
    reschedule = TaskReschedule.objects.get()
    assert (reschedule.ti_id, reschedule.try_number) == (ti.pk, ti.try_number)
    assert reschedule.start_date == ti.start_date
    assert reschedule.reschedule_date == datetime(2026, 11, 30, 5, tzinfo=UTC)
    response = client_for(ti).get(url)
    assert response.status_code == 200
    assert response.json() == ti.start_date.isoformat().replace("+00:00", "Z")
