"""Airflow's ``/api/v2/dags/{dag_id}/tasks`` and ``…/tasks/{task_id}`` (issue 40): a DAG's
tasks as declared — trigger rule, retries and delay, pool and priority, depends on past,
downstream tasks — in Airflow's shape and order."""

from __future__ import annotations

import pytest

from assets_app.models import DagTask
from tests.factories import DagFactory

pytestmark = pytest.mark.django_db

DAG_ID = "warehouse_orders_daily_rollup_v2"


@pytest.fixture
def dag():
    dag = DagFactory(dag_id=DAG_ID, tags=["orders"])
    for task_id, upstream, extra in (
        ("extract_orders", [], {"retries": 2, "retry_delay": 90.0, "priority_weight": 5}),
        (
            "transform_orders",
            ["extract_orders"],
            {"pool": "warehouse", "pool_slots": 2, "queue": "etl"},
        ),
        ("load_orders_fact", ["transform_orders"], {"depends_on_past": True}),
        ("notify", ["load_orders_fact"], {"trigger_rule": "all_done"}),
    ):
        DagTask.objects.create(dag=dag, task_id=task_id, upstream=upstream, **extra)
    return dag


def test_the_tasks_in_airflows_shape(dag, admin_api):
    response = admin_api.get(f"dags/{DAG_ID}/tasks")

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["total_entries"] == 4
    by_id = {t["task_id"]: t for t in body["tasks"]}
    assert [t["task_id"] for t in body["tasks"]] == sorted(by_id)
    extract = by_id["extract_orders"]
    assert extract["retries"] == 2
    assert extract["retry_delay"] == {
        "__type": "TimeDelta",
        "days": 0,
        "seconds": 90,
        "microseconds": 0,
    }
    assert extract["downstream_task_ids"] == ["transform_orders"]
    assert (by_id["transform_orders"]["pool"], by_id["transform_orders"]["pool_slots"]) == (
        "warehouse",
        2,
    )
    assert (by_id["transform_orders"]["queue"], extract["queue"]) == ("etl", "default")
    assert by_id["load_orders_fact"]["depends_on_past"] is True
    assert by_id["notify"]["trigger_rule"] == "all_done"
    assert by_id["notify"]["downstream_task_ids"] == []


def test_order_by_and_one_task(dag, admin_api):
    ordered = admin_api.get(f"dags/{DAG_ID}/tasks", {"order_by": "-priority_weight"}).json()
    assert ordered["tasks"][0]["task_id"] == "extract_orders"
    assert admin_api.get(f"dags/{DAG_ID}/tasks", {"order_by": "nope"}).status_code == 400

    one = admin_api.get(f"dags/{DAG_ID}/tasks/transform_orders")
    assert one.status_code == 200
    assert one.json()["downstream_task_ids"] == ["load_orders_fact"]
    assert admin_api.get(f"dags/{DAG_ID}/tasks/missing").json() == {
        "detail": "Task with id missing was not found"
    }
    assert admin_api.get("dags/no_such_dag/tasks").status_code == 404
