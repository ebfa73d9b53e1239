"""Airflow's ``/api/v2/dagTags`` (``airflowctl dags get-tags``): the tags of DAGs that are not
stale, each once, by name, with Airflow's pattern filters and pages."""

from __future__ import annotations

import pytest
from airflow_client.client.models.dag_tag_collection_response import DAGTagCollectionResponse

from tests.factories import DagFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def tagged():
    DagFactory(dag_id="warehouse_orders_daily_rollup_v2", tags=["orders", "finance", "daily"])
    DagFactory(dag_id="customer_360_refresh", tags=["customers", "daily"])
    DagFactory(dag_id="untagged_maintenance")
    DagFactory(dag_id="retired_ledger_export", tags=["ledger", "finance"], is_stale=True)


def test_the_tags_of_current_dags_once_each_by_name(tagged, admin_api):
    response = admin_api.get("dagTags")

    assert response.status_code == 200
    assert response.json() == {
        "tags": ["customers", "daily", "finance", "orders"],  # not the stale DAG's ledger
        "total_entries": 4,
    }
    parsed = DAGTagCollectionResponse.from_dict(response.json())  # Airflow's client's model
    assert parsed is not None
    assert parsed.tags == ["customers", "daily", "finance", "orders"]


@pytest.mark.parametrize(
    ("query", "tags", "total"),
    [
        ("order_by=-name", ["orders", "finance", "daily", "customers"], 4),
        ("tag_name_pattern=DA|ord", ["daily", "orders"], 2),
        ("tag_name_prefix_pattern=c", ["customers"], 1),
        ("tag_name_pattern=~", ["customers", "daily", "finance", "orders"], 4),
        ("limit=2&offset=1", ["daily", "finance"], 4),
    ],
)
def test_patterns_order_and_pages(tagged, admin_api, query, tags, total):
    response = admin_api.client.get(f"/api/v2/dagTags?{query}", **admin_api.headers)

    assert response.status_code == 200, response.json()
    assert response.json() == {"tags": tags, "total_entries": total}


def test_bad_parameters_are_airflows_answers(tagged, admin_api):
    ordered = admin_api.client.get("/api/v2/dagTags?order_by=dag_id", **admin_api.headers)
    limited = admin_api.client.get("/api/v2/dagTags?limit=-1", **admin_api.headers)

    assert ordered.status_code == 400
    assert "dag_id" in ordered.json()["detail"]
    assert limited.status_code == 422


def test_reading_tags_needs_a_login(tagged, anonymous_api):
    assert anonymous_api.get("dagTags").status_code == 401
