"""No input is a 5xx on the execution API either: NUL characters in path ids and query
parameters, and times outside years 1 to 9999 in UTC, are Airflow's 422 naming the field
(or the JSON 404 of an unknown route), on SQLite and PostgreSQL alike; nothing is written."""

from __future__ import annotations

import pytest

from assets_app.models import TaskInstanceState, XCom
from tests.executionapi.conftest import client_for, state_url, wire_sample

pytestmark = pytest.mark.django_db

LATEST_LOCAL = "9999-12-31T23:59:59-05:00"  # 10000-01-01 in UTC
EARLIEST_LOCAL = "0001-01-01T00:00:00+05:00"  # year 0 in UTC
XCOM_PATHS = [
    pytest.param("{dag}/{run}/{task}/k%00", "key", id="key"),
    pytest.param("{dag}%00/{run}/{task}/k", "dag_id", id="dag_id"),
    pytest.param("{dag}/{run}%00/{task}/k", "run_id", id="run_id"),
    pytest.param("{dag}/{run}/%00/k", "task_id", id="task_id"),
]


def locs(response) -> list[list[str]]:
    return [error["loc"] for error in response.json()["detail"]]


@pytest.mark.parametrize("method", ["get", "post", "delete"])
@pytest.mark.parametrize(("path", "field"), XCOM_PATHS)
def test_a_nul_in_an_xcom_path_id_is_422_naming_it(make_ti, method, path, field):
    ti = make_ti()
    url = "/execution/xcoms/" + path.format(dag=ti.dag_id, run=ti.run_id, task=ti.task_id)
    body = {"data": 1, "format": "json"} if method == "post" else {}

    response = getattr(client_for(ti), method)(url, **body)

    assert response.status_code == 422, response.content
    assert ["path", field] in locs(response)
    assert not XCom.objects.exists()


@pytest.mark.parametrize(("path", "field"), XCOM_PATHS)
def test_head_of_an_xcom_path_holding_a_nul_is_422(make_ti, path, field):
    ti = make_ti()
    url = "/execution/xcoms/" + path.format(dag=ti.dag_id, run=ti.run_id, task=ti.task_id)

    response = client_for(ti).head(url)

    assert response.status_code == 422
    assert response.content == b""


def test_head_of_an_xcom_key_beyond_its_column_is_422(make_ti):
    ti = make_ti()

    response = client_for(ti).head(f"/execution/xcoms/{ti.dag_id}/{ti.run_id}/t/{'k' * 513}")

    assert response.status_code == 422


def test_head_of_a_good_xcom_path_still_counts(make_ti):
    ti = make_ti()
    url = f"/execution/xcoms/{ti.dag_id}/{ti.run_id}/{ti.task_id}/k"
    assert client_for(ti).post(url, 1, format="json").status_code == 201

    response = client_for(ti).head(url)

    assert response.status_code == 200
    assert response["Content-Range"] == "map_indexes 1"


@pytest.mark.parametrize(
    "query",
    [
        "assets/by-name?name=a%00",
        "assets/by-uri?uri=a%00",
        "asset-events/by-asset?name=a%00",
        "asset-events/by-asset?uri=a%00",
        "asset-events/by-asset-alias?name=a%00",
    ],
)
def test_a_nul_in_a_query_parameter_is_422_naming_it(make_ti, query):
    response = client_for(make_ti()).get(f"/execution/{query}")

    assert response.status_code == 422, response.content
    assert ["query", query.split("?")[1].split("=")[0]] in locs(response)


@pytest.mark.parametrize("parameter", ["after", "before"])
@pytest.mark.parametrize("value", [LATEST_LOCAL, EARLIEST_LOCAL])
def test_a_query_time_outside_the_range_is_422_naming_it(make_ti, parameter, value):
    response = client_for(make_ti()).get(
        "/execution/asset-events/by-asset", {"name": "a", parameter: value}
    )

    assert response.status_code == 422, response.content
    assert locs(response) == [["query", parameter]]


@pytest.mark.parametrize("value", [LATEST_LOCAL, EARLIEST_LOCAL])
def test_a_body_time_outside_the_range_is_422_and_the_task_keeps_running(make_ti, value):
    ti = make_ti()
    body = {**wire_sample("success_no_outlets"), "end_date": value}

    response = client_for(ti).patch(state_url(ti), body, format="json")

    assert response.status_code == 422, response.content
    assert locs(response) == [["body", "end_date"]]
    ti.refresh_from_db()
    assert ti.state == TaskInstanceState.RUNNING


@pytest.mark.parametrize("ti_id", ["%00", "0195e0b8-0000-7000-8000-00000000f0%00"])
def test_a_nul_in_a_task_instance_id_is_the_json_404(make_ti, ti_id):
    response = client_for(make_ti()).patch(
        f"/execution/task-instances/{ti_id}/run", {}, format="json"
    )

    assert response.status_code == 404, response.content
    assert response.json()["detail"]["reason"] == "not_found"
