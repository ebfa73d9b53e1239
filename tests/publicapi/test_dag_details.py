"""Airflow's ``/api/v2/dags/{dag_id}/details`` (issue 40): the DAG with what its file says of
it — dates, catchup, run timeout, params, schedule, time zone — in Airflow's shape."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from assets_app.models import DagImportError
from tests.factories import DagFactory, DagRunFactory

pytestmark = pytest.mark.django_db

DAG_ID = "warehouse_orders_daily_rollup_v2"


@pytest.fixture
def dag():
    dag = DagFactory(
        dag_id=DAG_ID,
        tags=["orders", "warehouse"],
        timetable={"cron": "0 6 * * 1-5", "timezone": "Europe/Berlin"},
        timetable_summary="0 6 * * 1-5",
        start_date=datetime(2026, 1, 1, tzinfo=UTC),
        catchup=True,
        dagrun_timeout=5400.0,
        params=[
            ["region", {"default": "eu", "description": "where", "schema": {"type": "string"}}],
            ["limit", {"schema": {"type": "integer"}}],
        ],
        fileloc="/srv/airflow/dags/orders.py",
    )
    DagRunFactory(dag=dag, state="running")
    DagRunFactory(dag=dag, state="success")
    return dag


def test_the_details_in_airflows_shape(dag, admin_api):
    response = admin_api.get(f"dags/{DAG_ID}/details")

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["dag_id"] == DAG_ID
    assert [t["name"] for t in body["tags"]] == ["orders", "warehouse"]
    assert (body["catchup"], body["dag_run_timeout"]) == (True, "P0DT1H30M0S")
    assert body["start_date"] == "2026-01-01T00:00:00Z"
    assert body["timezone"] == "Europe/Berlin"
    assert body["timetable_description"] == ("At 06:00, Monday through Friday (Europe/Berlin)")
    assert body["params"] == {
        "region": {
            "value": "eu",
            "schema": {"type": "string"},
            "description": "where",
            "source": None,
        },
        "limit": {
            "value": None,
            "schema": {"type": "integer"},
            "description": None,
            "source": None,
        },
    }
    assert (body["active_runs_count"], body["concurrency"]) == (1, dag.max_active_tasks)
    assert body["has_import_errors"] is False

    # its file fails to load now: every DAG route says so
    DagImportError.objects.create(filename=dag.fileloc, stacktrace="SyntaxError")
    assert admin_api.get(f"dags/{DAG_ID}/details").json()["has_import_errors"] is True
    assert admin_api.get(f"dags/{DAG_ID}").json()["has_import_errors"] is True
    (listed,) = admin_api.get("dags").json()["dags"]
    assert listed["has_import_errors"] is True


def test_an_unknown_dag_is_airflows_404(admin_api, anonymous_api):
    assert admin_api.get("dags/no_such_dag/details").json() == {
        "detail": "Dag with id no_such_dag was not found"
    }
    assert anonymous_api.get(f"dags/{DAG_ID}/details").status_code == 401
