"""Airflow's ``/api/v2/dagStats`` (issue 40): each DAG's runs counted by state, every state
listed in Airflow's order, one query whatever the number of DAGs and runs."""

from __future__ import annotations

import pytest

from tests.factories import DagFactory, DagRunFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def runs():
    orders = DagFactory(dag_id="warehouse_orders_daily_rollup_v2", tags=["orders"])
    customers = DagFactory(dag_id="customer_360_refresh", tags=["customers"])
    DagFactory(dag_id="never_run")
    for state in ("success", "success", "failed", "running"):
        DagRunFactory(dag=orders, state=state)
    DagRunFactory(dag=customers, state="queued")


def _stats(body: dict) -> dict[str, dict[str, int]]:
    return {d["dag_id"]: {s["state"]: s["count"] for s in d["stats"]} for d in body["dags"]}


def test_each_dag_with_runs_has_a_count_for_every_state(runs, admin_api):
    response = admin_api.get("dagStats")

    assert response.status_code == 200
    body = response.json()
    assert body["total_entries"] == 2
    assert [d["dag_id"] for d in body["dags"]] == [
        "customer_360_refresh",
        "warehouse_orders_daily_rollup_v2",
    ]
    assert [s["state"] for s in body["dags"][0]["stats"]] == [
        "queued",
        "running",
        "success",
        "failed",
    ]
    assert _stats(body)["warehouse_orders_daily_rollup_v2"] == {
        "queued": 0,
        "running": 1,
        "success": 2,
        "failed": 1,
    }


def test_dag_ids_select_the_dags(runs, admin_api, django_assert_max_num_queries):
    with django_assert_max_num_queries(6):  # the user, then one query for the counts
        response = admin_api.client.get(
            "/api/v2/dagStats?dag_ids=customer_360_refresh&dag_ids=never_run",
            **admin_api.headers,
        )

    assert _stats(response.json()) == {
        "customer_360_refresh": {"queued": 1, "running": 0, "success": 0, "failed": 0}
    }


def test_a_reader_without_run_permission_is_refused(runs, anonymous_api):
    assert anonymous_api.get("dagStats").status_code == 401
