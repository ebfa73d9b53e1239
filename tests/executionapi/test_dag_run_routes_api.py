"""/execution/dag-runs/…, /dags/{dag_id} and /health: Airflow 3.3.2's shapes, codes and error
bodies (``airflow/api_fastapi/execution_api/routes/dag_runs.py``, ``dags.py``, ``health.py``)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from rest_framework.test import APIClient

from assets_app.models import DagImportError, DagRun, TaskInstance
from tests.executionapi.conftest import client_for
from tests.factories import DagFactory, DagRunFactory, TaskInstanceFactory

pytestmark = pytest.mark.django_db

JAN = [datetime(2026, 1, day, tzinfo=UTC) for day in range(1, 6)]


@pytest.fixture
def caller(make_ti):
    """A running task instance (of another DAG) and a client holding its token."""
    ti = make_ti(dag_id="controller", task_id="trigger")
    return client_for(ti)


@pytest.fixture
def target():
    return DagFactory(dag_id="target", task_ids=["a", "b"], tags=["z", "a"])


# --- POST /dag-runs/{dag_id}/{run_id} ----------------------------------------------------------


def test_trigger_creates_a_running_run_with_a_task_instance_per_task(caller, target):
    response = caller.post(
        "/execution/dag-runs/target/manual__2026-01-03T00:00:00+00:00",
        {"logical_date": "2026-01-03T00:00:00+00:00", "conf": {"x": 1}},
        format="json",
    )

    assert response.status_code == 204, response.content
    assert response.content == b""
    run = DagRun.objects.get(dag_id="target")
    assert (run.run_id, run.state, run.conf) == (
        "manual__2026-01-03T00:00:00+00:00",
        "running",  # admitted at once: the DAG has room
        {"x": 1},
    )
    assert run.logical_date == JAN[2]
    assert sorted(run.task_instances.values_list("task_id", "state")) == [
        ("a", "scheduled"),
        ("b", "scheduled"),
    ]


def test_trigger_an_existing_run_is_airflows_409(caller, target):
    DagRunFactory(dag=target, run_id="r1")

    response = caller.post("/execution/dag-runs/target/r1", {}, format="json")

    assert response.status_code == 409
    assert response.json() == {
        "detail": {
            "reason": "already_exists",
            "message": "A run already exists for Dag 'target' with run_id 'r1'",
        }
    }


@pytest.mark.parametrize("stale", [False, True], ids=["unknown", "stale"])
def test_trigger_an_unknown_or_stale_dag_is_airflows_404(caller, stale):
    if stale:
        DagFactory(dag_id="gone", is_stale=True)

    response = caller.post("/execution/dag-runs/gone/r1", {}, format="json")

    assert response.status_code == 404
    assert response.json() == {
        "detail": {"reason": "not_found", "message": "Dag with dag_id: 'gone' not found"}
    }
    assert not DagRun.objects.filter(dag_id="gone").exists()


def test_trigger_a_dag_whose_file_fails_to_import_is_400(caller):
    DagFactory(dag_id="broken", fileloc="/dags/broken.py")
    DagImportError.objects.create(filename="/dags/broken.py", stacktrace="SyntaxError")

    response = caller.post("/execution/dag-runs/broken/r1", {}, format="json")

    assert response.status_code == 400
    assert response.json()["detail"] == {
        "reason": "import_errors",
        "message": "Dag with dag_id 'broken' has import errors and cannot be triggered",
    }


def test_trigger_with_a_partition_key_is_400_not_partitioned(caller, target):
    response = caller.post("/execution/dag-runs/target/r1", {"partition_key": "p"}, format="json")

    assert response.status_code == 400
    assert response.json()["detail"]["reason"] == "not_partitioned"
    assert not DagRun.objects.filter(dag_id="target").exists()


@pytest.mark.parametrize(
    ("body", "loc"),
    [
        pytest.param({"logical_date": "2026-01-01T00:00:00"}, ["body", "logical_date"], id="naive"),
        pytest.param({"conf": [1]}, ["body", "conf"], id="conf-list"),
        pytest.param({"nope": 1}, ["body", "nope"], id="extra-key"),
        pytest.param({"note": 3}, ["body", "note"], id="note-not-str"),
    ],
)
def test_trigger_with_a_bad_payload_is_422_naming_the_field(caller, target, body, loc):
    response = caller.post("/execution/dag-runs/target/r1", body, format="json")

    assert response.status_code == 422, response.content
    assert loc in [error["loc"] for error in response.json()["detail"]]
    assert not DagRun.objects.filter(dag_id="target").exists()


def test_trigger_with_a_run_id_the_registry_refuses_is_400_value_error(caller, target):
    response = caller.post("/execution/dag-runs/target/" + "r" * 300, {}, format="json")

    assert response.status_code == 400
    assert response.json()["detail"]["reason"] == "value_error"


@pytest.mark.parametrize("state", ["success", "failed"])
def test_a_finished_task_may_not_trigger(make_ti, target, state):
    ti = make_ti(state=state)

    response = client_for(ti).post("/execution/dag-runs/target/r1", {}, format="json")

    assert response.status_code == 403
    assert response.json()["detail"]["reason"] == "access_denied"
    assert not DagRun.objects.filter(dag_id="target").exists()


def test_a_token_without_a_task_instance_may_read_but_not_trigger(target):
    client = client_for("0195e0b8-0000-7000-8000-0000000000aa")
    DagRunFactory(dag=target, run_id="r0")

    assert client.get("/execution/dag-runs/target/r0/state").status_code == 200
    assert client.post("/execution/dag-runs/target/r1", {}, format="json").status_code == 403


# --- POST /dag-runs/{dag_id}/{run_id}/clear ----------------------------------------------------


def test_clear_runs_the_finished_task_instances_again(caller, target):
    run = DagRunFactory(dag=target, run_id="r1", state="failed")
    failed = TaskInstanceFactory(dag_run=run, task_id="a", state="failed")
    TaskInstanceFactory(dag_run=run, task_id="b", state="success")

    response = caller.post("/execution/dag-runs/target/r1/clear")

    assert response.status_code == 204, response.content
    states = dict(TaskInstance.objects.filter(run_id="r1").values_list("task_id", "state"))
    assert states == {"a": "scheduled", "b": "scheduled"}
    assert TaskInstance.objects.get(run_id="r1", task_id="a").try_number == failed.try_number + 1
    run.refresh_from_db()
    assert run.state == "running"  # re-admitted at once


def test_clear_a_run_with_a_running_task_is_409(caller, target):
    run = DagRunFactory(dag=target, run_id="r1", state="running")
    TaskInstanceFactory(dag_run=run, task_id="a", state="running")

    response = caller.post("/execution/dag-runs/target/r1/clear")

    assert response.status_code == 409
    assert response.json()["detail"]["reason"] == "clear_refused"


def test_clear_unknown_dag_or_run_is_airflows_404(caller, target):
    no_dag = caller.post("/execution/dag-runs/nodag/r1/clear")
    no_run = caller.post("/execution/dag-runs/target/norun/clear")

    assert no_dag.status_code == no_run.status_code == 404
    assert no_dag.json()["detail"]["message"] == "Dag with dag_id: 'nodag' not found"
    assert no_run.json()["detail"] == {
        "reason": "not_found",
        "message": "Dag run with run_id: 'norun' not found",
    }


# --- GET /dag-runs/{dag_id}/{run_id}, /state, /count, /previous ------------------------------


def test_get_dag_run_is_airflows_dag_run(caller, target):
    DagRunFactory(
        dag=target,
        run_id="r1",
        logical_date=JAN[0],
        data_interval_start=JAN[0],
        data_interval_end=JAN[1],
        run_after=JAN[1],
        state="success",
        conf={"k": "v"},
    )

    response = caller.get("/execution/dag-runs/target/r1")

    assert response.status_code == 200
    assert response.json() == {
        "dag_id": "target",
        "run_id": "r1",
        "logical_date": "2026-01-01T00:00:00Z",
        "data_interval_start": "2026-01-01T00:00:00Z",
        "data_interval_end": "2026-01-02T00:00:00Z",
        "run_after": "2026-01-02T00:00:00Z",
        "start_date": None,
        "end_date": None,
        "clear_number": 0,
        "run_type": "manual",
        "state": "success",
        "conf": {"k": "v"},
        "triggering_user_name": None,
        "consumed_asset_events": [],
        "partition_key": None,
        "partition_date": None,
        "note": None,
        "team_name": None,
    }


def test_get_state_of_a_run(caller, target):
    DagRunFactory(dag=target, run_id="manual__x+00:00", state="running")

    response = caller.get("/execution/dag-runs/target/manual__x+00:00/state")

    assert (response.status_code, response.json()) == (200, {"state": "running"})


@pytest.mark.parametrize("suffix", ["", "/state"])
def test_an_unknown_run_is_airflows_404(caller, suffix):
    response = caller.get(f"/execution/dag-runs/target/nope{suffix}")

    assert response.status_code == 404
    assert response.json() == {
        "detail": {
            "reason": "not_found",
            "message": "Dag run with dag_id 'target' and run_id 'nope' was not found",
        }
    }


@pytest.fixture
def runs(target):
    states = ["success", "failed", "success", "running", "queued"]
    return [
        DagRunFactory(dag=target, run_id=f"r{i}", logical_date=JAN[i], state=state)
        for i, state in enumerate(states)
    ]


@pytest.mark.parametrize(
    ("params", "count"),
    [
        pytest.param({}, 5, id="all"),
        pytest.param({"states": ["success"]}, 2, id="one-state"),
        pytest.param({"states": ["success", "failed"]}, 3, id="two-states"),
        pytest.param({"run_ids": ["r0", "r4", "rx"]}, 2, id="run-ids"),
        pytest.param(
            {"logical_dates": [JAN[1].isoformat(), JAN[3].isoformat()]}, 2, id="logical-dates"
        ),
        pytest.param({"run_ids": ["r0", "r1"], "states": ["failed"]}, 1, id="and"),
    ],
)
def test_count_runs_by_filters(caller, runs, params, count):
    response = caller.get("/execution/dag-runs/count", {"dag_id": "target", **params})

    assert (response.status_code, response.json()) == (200, count)


def test_count_needs_a_dag_id(caller):
    response = caller.get("/execution/dag-runs/count")

    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["query", "dag_id"]


@pytest.mark.parametrize(
    ("params", "run_id"),
    [
        pytest.param({"logical_date": JAN[3].isoformat()}, "r2", id="latest-before"),
        pytest.param({"logical_date": JAN[3].isoformat(), "state": "failed"}, "r1", id="state"),
        pytest.param({"logical_date": JAN[0].isoformat()}, None, id="none-before"),
    ],
)
def test_previous_run_before_a_logical_date(caller, runs, params, run_id):
    response = caller.get("/execution/dag-runs/previous", {"dag_id": "target", **params})

    assert response.status_code == 200
    body = response.json()
    assert (body and body["run_id"]) == run_id


@pytest.mark.parametrize(
    ("params", "loc"),
    [
        pytest.param({"dag_id": "target"}, ["query", "logical_date"], id="missing-date"),
        pytest.param(
            {"dag_id": "target", "logical_date": "2026-01-01T00:00:00"},
            ["query", "logical_date"],
            id="naive-date",
        ),
        pytest.param(
            {"dag_id": "target", "logical_date": JAN[0].isoformat(), "state": "bogus"},
            ["query", "state"],
            id="bad-state",
        ),
    ],
)
def test_previous_with_bad_parameters_is_422(caller, params, loc):
    response = caller.get("/execution/dag-runs/previous", params)

    assert response.status_code == 422
    assert loc in [error["loc"] for error in response.json()["detail"]]


@pytest.mark.parametrize(
    "url",
    [
        "/execution/dag-runs/t%00/r",
        "/execution/dag-runs/t/r%00/state",
        "/execution/dags/d%00",
        "/execution/task-instances/previous/d%00/t",
    ],
)
def test_a_nul_in_a_path_id_is_422(caller, url):
    response = caller.get(url)

    assert response.status_code == 422, response.content
    assert response.json()["detail"][0]["loc"][0] == "path"


# --- GET /dags/{dag_id} ------------------------------------------------------------------------


def test_get_dag_is_airflows_dag_response(caller, target):
    target.is_paused = True
    target.fileloc = "/opt/dags/target_dag.py"
    target.next_dagrun = JAN[4]
    target.save()

    response = caller.get("/execution/dags/target")

    assert response.status_code == 200
    assert response.json() == {
        "dag_id": "target",
        "is_paused": True,
        "bundle_name": None,
        "bundle_version": None,
        "relative_fileloc": "target_dag.py",
        "owners": None,
        "tags": ["a", "z"],
        "next_dagrun": "2026-01-05T00:00:00Z",
    }


def test_get_unknown_dag_is_airflows_404(caller):
    response = caller.get("/execution/dags/nope")

    assert response.status_code == 404
    assert response.json() == {
        "detail": {"reason": "not_found", "message": "The Dag with dag_id: `nope` was not found"}
    }


# --- GET /health, /health/ping; the version header -------------------------------------------


def test_health_needs_no_token():
    assert APIClient().get("/execution/health").json() == {"status": "healthy"}
    ping = APIClient().get("/execution/health/ping")
    assert (ping.status_code, ping.json()) == (200, {"ok": ["database"], "failing": {}})


def test_every_answer_names_the_api_version(caller):
    asked = caller.get("/execution/dags/nope", HTTP_AIRFLOW_API_VERSION="2025-11-05")
    default = caller.get("/execution/dags/nope")
    unreadable = caller.get("/execution/dags/nope", HTTP_AIRFLOW_API_VERSION="x\ty")

    assert asked["Airflow-API-Version"] == "2025-11-05"
    assert default["Airflow-API-Version"] == "2026-06-30"
    assert unreadable["Airflow-API-Version"] == "2026-06-30"


@pytest.mark.parametrize(
    "url",
    [
        "/execution/dag-runs/target/r1",
        "/execution/dag-runs/target/r1/state",
        "/execution/dag-runs/count?dag_id=target",
        "/execution/dags/target",
    ],
)
def test_dag_run_routes_need_a_token(url):
    assert APIClient().get(url).status_code == 401


def test_trigger_without_a_logical_date_makes_a_run_without_one(caller, target):
    """Airflow 3.3's execution API leaves the run's logical date (and data interval) null."""
    response = caller.post("/execution/dag-runs/target/no_date", {"conf": {}}, format="json")
    null = caller.post(
        "/execution/dag-runs/target/null_date", {"logical_date": None}, format="json"
    )

    assert (response.status_code, null.status_code) == (204, 204), response.content
    runs = DagRun.objects.filter(dag_id="target").order_by("run_id")
    assert [(r.run_id, r.logical_date, r.data_interval_start) for r in runs] == [
        ("no_date", None, None),
        ("null_date", None, None),
    ]
    state = caller.get("/execution/dag-runs/target/no_date/state")
    assert state.status_code == 200
