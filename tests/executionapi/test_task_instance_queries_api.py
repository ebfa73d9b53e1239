"""GET /execution/task-instances/count, /states, /previous/{dag_id}/{task_id} and
/breadcrumbs: what a task asks about other tasks (``get_ti_count``, ``get_task_states``,
``get_previous_ti``, ``get_task_breadcrumbs``), in Airflow 3.3.2's shapes."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tests.executionapi.conftest import client_for
from tests.factories import DagFactory, DagRunFactory, TaskInstanceFactory

pytestmark = pytest.mark.django_db

JAN = [datetime(2026, 1, day, tzinfo=UTC) for day in range(1, 4)]


@pytest.fixture
def caller(make_ti):
    return client_for(make_ti(dag_id="asker", task_id="ask"))


@pytest.fixture
def tis():
    """Two runs of ``other``: tasks ``x``, ``grp.y``, ``grp.z`` (mapped 0 and 1)."""
    dag = DagFactory(dag_id="other", task_ids=["x", "grp.y", "grp.z"])
    runs = [
        DagRunFactory(dag=dag, run_id=f"r{i}", logical_date=JAN[i], state="success")
        for i in range(2)
    ]
    rows = [
        (runs[0], "x", -1, "success"),
        (runs[0], "grp.y", -1, "failed"),
        (runs[0], "grp.z", 0, "success"),
        (runs[0], "grp.z", 1, "skipped"),
        (runs[1], "x", -1, None),
        (runs[1], "grp.y", -1, "running"),
    ]
    return [
        TaskInstanceFactory(
            dag_run=run,
            task_id=task_id,
            map_index=map_index,
            state=state,
            start_date=run.logical_date,
            duration=1.5,
        )
        for run, task_id, map_index, state in rows
    ]


@pytest.mark.parametrize(
    ("params", "count"),
    [
        pytest.param({}, 6, id="all"),
        pytest.param({"task_ids": ["x"]}, 2, id="task"),
        pytest.param({"task_ids": ["x"], "states": ["null"]}, 1, id="no-state"),
        pytest.param({"states": ["null", "success"]}, 3, id="no-state-or-success"),
        pytest.param({"map_index": 1}, 1, id="map-index"),
        pytest.param({"run_ids": ["r1"]}, 2, id="run"),
        pytest.param({"logical_dates": [JAN[0].isoformat()]}, 4, id="logical-date"),
        pytest.param({"task_group_id": "grp"}, 4, id="group"),
        pytest.param({"task_group_id": "grp", "states": ["success"]}, 1, id="group-state"),
        pytest.param({"task_group_id": "grp", "run_ids": ["r1"]}, 1, id="group-run"),
    ],
)
def test_count(caller, tis, params, count):
    response = caller.get("/execution/task-instances/count", {"dag_id": "other", **params})

    assert (response.status_code, response.json()) == (200, count)


def test_an_unknown_task_group_is_airflows_404(caller, tis):
    response = caller.get(
        "/execution/task-instances/count", {"dag_id": "other", "task_group_id": "nogrp"}
    )

    assert response.status_code == 404
    assert response.json() == {
        "detail": {"reason": "not_found", "message": "Task group nogrp not found in DAG other"}
    }


def test_states_by_run_then_task(caller, tis):
    response = caller.get("/execution/task-instances/states", {"dag_id": "other"})

    assert response.status_code == 200
    assert response.json() == {
        "task_states": {
            "r0": {"x": "success", "grp.y": "failed", "grp.z_0": "success", "grp.z_1": "skipped"},
            "r1": {"x": None, "grp.y": "running"},
        }
    }


def test_states_of_a_group_and_of_tasks(caller, tis):
    group = caller.get(
        "/execution/task-instances/states",
        {"dag_id": "other", "task_group_id": "grp", "run_ids": ["r1"]},
    )
    tasks = caller.get(
        "/execution/task-instances/states",
        {"dag_id": "other", "task_ids": ["x"], "task_group_id": "grp", "run_ids": ["r1"]},
    )

    assert group.json() == {"task_states": {"r1": {"grp.y": "running"}}}
    assert tasks.json() == {"task_states": {"r1": {"x": None, "grp.y": "running"}}}


@pytest.mark.parametrize(
    ("params", "loc"),
    [
        pytest.param({}, ["query", "dag_id"], id="no-dag"),
        pytest.param({"dag_id": "o", "map_index": "x"}, ["query", "map_index"], id="map"),
        pytest.param(
            {"dag_id": "o", "logical_dates": ["2026-01-01"]}, ["query", "logical_dates"], id="date"
        ),
        pytest.param({"dag_id": "o", "run_ids": ["a\x00"]}, ["query", "run_ids"], id="nul"),
    ],
)
@pytest.mark.parametrize("route", ["count", "states"])
def test_bad_filters_are_422_naming_the_parameter(caller, route, params, loc):
    response = caller.get(f"/execution/task-instances/{route}", params)

    assert response.status_code == 422, response.content
    assert loc in [error["loc"][:2] for error in response.json()["detail"]]


def test_previous_task_instance(caller, tis):
    latest = caller.get("/execution/task-instances/previous/other/grp.y")
    before = caller.get(
        "/execution/task-instances/previous/other/grp.y", {"logical_date": JAN[1].isoformat()}
    )
    failed = caller.get("/execution/task-instances/previous/other/grp.y", {"state": "failed"})
    mapped = caller.get("/execution/task-instances/previous/other/grp.z", {"map_index": 1})
    none = caller.get(
        "/execution/task-instances/previous/other/x", {"logical_date": JAN[0].isoformat()}
    )

    assert latest.json()["run_id"] == "r1"
    assert before.json() == {
        "task_id": "grp.y",
        "dag_id": "other",
        "run_id": "r0",
        "logical_date": "2026-01-01T00:00:00Z",
        "start_date": "2026-01-01T00:00:00Z",
        "end_date": None,
        "state": "failed",
        "try_number": 1,
        "map_index": -1,
        "duration": 1.5,
    }
    assert failed.json()["run_id"] == "r0"
    assert (mapped.json()["map_index"], mapped.json()["state"]) == (1, "skipped")
    assert (none.status_code, none.content) == (200, b"null")


def test_previous_with_a_bad_state_is_422(caller):
    response = caller.get("/execution/task-instances/previous/d/t", {"state": "bogus"})

    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["query", "state"]


def test_breadcrumbs_are_the_finished_task_instances_of_a_run(caller, tis):
    response = caller.get(
        "/execution/task-instances/breadcrumbs", {"dag_id": "other", "run_id": "r0"}
    )
    running = caller.get(
        "/execution/task-instances/breadcrumbs", {"dag_id": "other", "run_id": "r1"}
    )

    assert response.status_code == 200
    crumbs = response.json()["breadcrumbs"]
    assert [(c["task_id"], c["map_index"], c["state"]) for c in crumbs] == [
        ("grp.y", -1, "failed"),
        ("grp.z", 0, "success"),
        ("grp.z", 1, "skipped"),
        ("x", -1, "success"),
    ]
    assert set(crumbs[0]) == {"task_id", "map_index", "state", "operator", "duration"}
    assert running.json() == {"breadcrumbs": []}


@pytest.mark.parametrize(
    ("url", "loc"),
    [
        pytest.param("/task-instances/previous/d/t?state=", ["query", "state"], id="ti-state"),
        pytest.param("/task-instances/previous/d/t?map_index=", ["query", "map_index"], id="map"),
        pytest.param("/task-instances/count?dag_id=d&map_index=", ["query", "map_index"], id="c"),
        pytest.param(
            "/dag-runs/previous?dag_id=d&logical_date=2026-01-01T00:00:00Z&state=",
            ["query", "state"],
            id="run-state",
        ),
    ],
)
def test_an_empty_parameter_is_a_value_not_an_omission(caller, url, loc):
    response = caller.get("/execution" + url)

    assert response.status_code == 422, response.content
    assert response.json()["detail"][0]["loc"] == loc


def test_an_empty_list_item_matches_nothing(caller, tis):
    response = caller.get("/execution/task-instances/count?dag_id=other&task_ids=")

    assert (response.status_code, response.json()) == (200, 0)
