"""GET /execution/xcoms/{dag_id}/{run_id}/{task_id}/{key}/slice, …/item/{offset}, and the
``offset=`` and ``include_prior_dates=`` of the plain XCom read (Airflow 3.3.2's routes)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from rest_framework.test import APIClient

from assets_app.models import XCom
from tests.executionapi.conftest import client_for
from tests.factories import DagFactory, DagRunFactory

pytestmark = pytest.mark.django_db

VALUES = ["v0", "v1", None, {"v": 3}, [4], 5, "v6"]


def push_mapped(dag_run, values, *, task_id="mapped", key="return_value"):
    """One XCom per map index, pushed in a shuffled order (the routes order by map index)."""
    order = sorted(range(len(values)), key=lambda i: (i * 5) % len(values))
    for map_index in order:
        XCom.objects.create(
            dag_run=dag_run,
            dag_id=dag_run.dag_id,
            run_id=dag_run.run_id,
            task_id=task_id,
            map_index=map_index,
            key=key,
            value=values[map_index],
        )


@pytest.fixture
def mapped(make_ti):
    ti = make_ti(dag_id="seq")
    push_mapped(ti.dag_run, VALUES)
    base = f"/execution/xcoms/{ti.dag_id}/{ti.run_id}/mapped/return_value"
    return client_for(ti), base


SLICES = [
    (None, None, None),
    (2, None, None),
    (None, 3, None),
    (1, 5, 2),
    (-3, None, None),
    (None, -2, None),
    (-5, -1, 2),
    (None, None, -1),
    (5, 1, -2),
    (-1, -6, -2),
    (None, 2, -1),
    (2, -2, None),
    (-2, 3, -1),
    (100, None, None),
    (-100, 100, 3),
    (3, 3, None),
    (None, None, 0),  # a zero step is 1, as Airflow's route
]


@pytest.mark.parametrize(("start", "stop", "step"), SLICES)
def test_slice_is_pythons_slice_of_the_values_by_map_index(mapped, start, stop, step):
    client, base = mapped
    given = {"start": start, "stop": stop, "step": step}
    params = {name: value for name, value in given.items() if value is not None}

    response = client.get(f"{base}/slice", params)

    assert response.status_code == 200, response.content
    assert response.json() == VALUES[slice(start, stop, step or 1)]


def test_slice_of_nothing_pushed_is_an_empty_list(make_ti):
    ti = make_ti()

    response = client_for(ti).get(f"/execution/xcoms/{ti.dag_id}/{ti.run_id}/none/k/slice")

    assert (response.status_code, response.json()) == (200, [])


@pytest.mark.parametrize(
    ("offset", "value"), [(0, "v0"), (3, {"v": 3}), (6, "v6"), (-1, "v6"), (-7, "v0"), (2, None)]
)
def test_item_is_the_value_at_a_position(mapped, offset, value):
    client, base = mapped

    response = client.get(f"{base}/item/{offset}")

    assert (response.status_code, response.json()) == (200, value)


@pytest.mark.parametrize("offset", [7, -8])
def test_item_past_either_end_is_airflows_404(mapped, offset):
    client, base = mapped

    response = client.get(f"{base}/item/{offset}")

    assert response.status_code == 404
    assert response.json() == {
        "detail": {
            "reason": "not_found",
            "message": f"XCom with key='return_value' offset={offset} not found for task "
            f"'mapped' in DAG run '{base.split('/')[4]}' of 'seq'",
        }
    }


@pytest.mark.parametrize(
    ("url", "loc"),
    [
        pytest.param("/item/x", ["path", "offset"], id="offset-not-int"),
        pytest.param("/item/1.0", ["path", "offset"], id="offset-float"),
        pytest.param("/item/" + "9" * 30, ["path", "offset"], id="offset-too-big"),
        pytest.param("/slice?start=a", ["query", "start"], id="start"),
        pytest.param("/slice?step=1.5", ["query", "step"], id="step"),
        pytest.param("/slice?stop=" + "9" * 30, ["query", "stop"], id="stop-too-big"),
        pytest.param("/slice?include_prior_dates=maybe", ["query", "include_prior_dates"], id="b"),
    ],
)
def test_bad_positions_are_422_naming_the_parameter(mapped, url, loc):
    client, base = mapped

    response = client.get(base + url)

    assert response.status_code == 422, response.content
    assert loc in [error["loc"] for error in response.json()["detail"]]


def test_a_key_with_slashes_is_one_key(make_ti):
    ti = make_ti()
    push_mapped(ti.dag_run, [1, 2], key="a/b")
    base = f"/execution/xcoms/{ti.dag_id}/{ti.run_id}/mapped/a/b"
    client = client_for(ti)

    assert client.get(f"{base}/slice").json() == [1, 2]
    assert client.get(f"{base}/item/-1").json() == 2
    assert client.get(base, {"map_index": 1}).json() == {"key": "a/b", "value": 2}


@pytest.mark.parametrize(("offset", "value"), [(0, "v0"), (2, {"v": 3}), (-1, "v6"), (-2, 5)])
def test_get_with_an_offset_skips_null_values(mapped, offset, value):
    client, base = mapped

    response = client.get(base, {"offset": offset, "map_index": 4})  # offset wins

    assert response.status_code == 200
    assert response.json() == {"key": "return_value", "value": value}


def test_get_with_an_offset_past_the_end_is_airflows_404(mapped):
    client, base = mapped

    response = client.get(base, {"offset": 6})  # six non-null values

    assert response.status_code == 404
    assert response.json()["detail"]["message"].startswith(
        "XCom with key='return_value' offset=6 not found for task 'mapped'"
    )


def test_get_without_offset_names_the_map_index_it_missed(mapped):
    client, base = mapped

    response = client.get(base, {"map_index": 9})

    assert response.status_code == 404
    assert "map_index=9 not found" in response.json()["detail"]["message"]


def test_include_prior_dates_reads_earlier_runs_of_the_dag(make_ti):
    # given three runs of one DAG, pushing from the middle and the last but not the current one
    dag = DagFactory(dag_id="daily")
    runs = [
        DagRunFactory(dag=dag, run_id=f"r{day}", logical_date=datetime(2026, 1, day, tzinfo=UTC))
        for day in (1, 2, 3, 4)
    ]
    for run, value in ((runs[0], "day1"), (runs[1], "day2"), (runs[3], "day4")):  # not r3
        XCom.objects.create(
            dag_run=run,
            dag_id="daily",
            run_id=run.run_id,
            task_id="t",
            key="return_value",
            value=value,
        )
    ti = make_ti(dag_id="daily", task_id="t", dag_run=runs[2])
    client = client_for(ti)
    base = "/execution/xcoms/daily/r3/t/return_value"

    # when the third run's task reads its own XCom, with and without earlier runs
    own = client.get(base)
    prior = client.get(base, {"include_prior_dates": "true"})
    prior_slice = client.get(f"{base}/slice", {"include_prior_dates": "true"})

    # then the earlier runs' values count (the newest first), the later one's never
    assert own.status_code == 404
    assert prior.json() == {"key": "return_value", "value": "day2"}
    assert sorted(prior_slice.json()) == ["day1", "day2"]
    assert client.get(f"{base}/slice").json() == []


def test_reads_need_a_token(mapped):
    _, base = mapped

    assert APIClient().get(f"{base}/slice").status_code == 401
    assert APIClient().get(f"{base}/item/0").status_code == 401


def test_reading_an_xcom_is_one_query(mapped, django_assert_num_queries):
    client, base = mapped
    client.get(base)  # warm up: the token check's imports and caches

    # the XCom row, by its natural key (no join)
    with django_assert_num_queries(1):
        response = client.get(base, {"map_index": 3})

    assert response.json()["value"] == {"v": 3}
