"""Airflow's XCom list, ``…/taskInstances/{task_id}/xcomEntries`` (issue 40): a task's, a
run's or every DAG's entries (``~``), filtered and paged as Airflow's, without their values."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from assets_app.models import XCom
from tests.factories import DagFactory, DagRunFactory

pytestmark = pytest.mark.django_db

DAG_ID = "warehouse_orders_daily_rollup_v2"
JAN = [datetime(2026, 1, day, tzinfo=UTC) for day in range(1, 4)]
LIST = "dags/{}/dagRuns/{}/taskInstances/{}/xcomEntries"


@pytest.fixture
def runs():
    dag = DagFactory(dag_id=DAG_ID, tags=["orders"])
    made = []
    for day in JAN:
        run = DagRunFactory(
            dag=dag, run_id=f"scheduled__{day.isoformat()}", logical_date=day, run_after=day
        )
        for task_id, key, value in (
            ("extract_orders", "return_value", {"rows": 3}),
            ("extract_orders", "row_count", 3),
            ("load_orders_fact", "return_value", "ok"),
        ):
            XCom.objects.create(
                dag_run=run,
                dag_id=DAG_ID,
                run_id=run.run_id,
                task_id=task_id,
                key=key,
                value=value,
            )
        made.append(run)
    other = DagRunFactory(dag=DagFactory(dag_id="customer_360"), run_id="manual__1")
    XCom.objects.create(
        dag_run=other, dag_id="customer_360", run_id="manual__1", task_id="t", key="return_value"
    )
    return made


def test_a_tasks_entries_in_airflows_shape_and_order(runs, admin_api):
    run = runs[0]
    response = admin_api.get(LIST.format(DAG_ID, run.run_id, "extract_orders"))

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["total_entries"] == 2
    assert [e["key"] for e in body["xcom_entries"]] == ["return_value", "row_count"]
    entry = body["xcom_entries"][0]
    assert set(entry) == {
        *("key", "timestamp", "logical_date", "map_index", "task_id", "dag_id", "run_id"),
        *("dag_display_name", "task_display_name", "run_after"),
    }
    assert entry["logical_date"] == "2026-01-01T00:00:00Z"
    assert "value" not in entry


def test_tilde_lists_across_runs_and_dags_with_filters_and_pages(runs, admin_api):
    every = admin_api.get(LIST.format("~", "~", "~")).json()
    assert every["total_entries"] == 10

    of_dag = admin_api.get(LIST.format(DAG_ID, "~", "~"), {"xcom_key": "return_value"}).json()
    assert of_dag["total_entries"] == 6
    keyed = admin_api.get(LIST.format("~", "~", "~"), {"xcom_key_pattern": "ROW"}).json()
    assert [e["key"] for e in keyed["xcom_entries"]] == ["row_count"] * 3
    recent = admin_api.get(
        LIST.format(DAG_ID, "~", "load_orders_fact"),
        {"logical_date_gte": "2026-01-02T00:00:00Z", "order_by": "-run_id", "limit": 1},
    ).json()
    assert recent["total_entries"] == 2
    assert [e["run_id"] for e in recent["xcom_entries"]] == [runs[2].run_id]


def test_bad_parameters_are_airflows_errors(runs, admin_api):
    assert admin_api.get(LIST.format("~", "~", "~"), {"order_by": "value"}).status_code == 400
    assert admin_api.get(LIST.format("~", "~", "~"), {"map_index": -2}).status_code == 422
    assert admin_api.get(LIST.format("~", "~", "~"), {"limit": "x"}).status_code == 422
