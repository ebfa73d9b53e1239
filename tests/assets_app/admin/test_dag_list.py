"""The DAG list answers what Airflow's DAG list does at a glance: the schedule in words and the
next run, the tags (and a filter by tag); the overview says how many DAG files failed to
import (issue 40)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from assets_app.models import DagImportError
from assets_app.selectors.dags import dag_schedule_description
from tests.assets_app.admin import changelist, page_text
from tests.factories import DagFactory

pytestmark = pytest.mark.django_db

INDEX = "/admin/"
NEXT = datetime(2026, 12, 6, 0, 0, tzinfo=UTC)


@pytest.fixture
def dags():
    return {
        "daily": DagFactory(
            dag_id="warehouse_orders_daily_rollup_v2",
            tags=["orders", "warehouse"],
            timetable={"cron": "0 0 * * *", "timezone": "UTC"},
            timetable_summary="@daily",
            next_dagrun=NEXT,
            next_dagrun_create_after=NEXT,
        ),
        "assets": DagFactory(
            dag_id="customer_360_refresh",
            tags=["customers"],
            asset_expression={"any": [{"asset": {"name": "orders", "uri": "s3://lake/orders"}}]},
        ),
        "both": DagFactory(
            dag_id="finance_close",
            asset_expression={"asset": {"name": "ledger", "uri": "s3://lake/ledger"}},
            timetable={"cron": "0 6 * * 1-5", "timezone": "Europe/Berlin"},
            timetable_summary="0 6 * * 1-5",
        ),
        "manual": DagFactory(dag_id="ad_hoc_backfill"),
    }


def test_the_schedule_in_words_as_airflow_describes_it(dags):
    assert dag_schedule_description(dags["daily"]) == "At 00:00"
    assert dag_schedule_description(dags["assets"]) == "Triggered by assets"
    assert dag_schedule_description(dags["both"]) == (
        "Triggered by assets or At 06:00, Monday through Friday (Europe/Berlin)"
    )
    assert dag_schedule_description(dags["manual"]) == "Never, external triggers only"


def test_the_dag_list_shows_schedule_words_next_run_and_tags(admin_client, dags):
    text = page_text(admin_client, changelist("dag"))

    assert "@daily" in text
    assert "At 00:00" in text
    assert "2026-12-06 00:00" in text  # the daily DAG's next run
    assert "0 6 * * 1-5" in text
    assert "Monday through Friday" in text
    assert 'class="ar-tag">orders<' in text
    assert 'class="ar-tag">warehouse<' in text


def test_the_dag_list_filters_by_tag(admin_client, dags):
    text = page_text(admin_client, changelist("dag"), {"tag": "orders"})

    assert "warehouse_orders_daily_rollup_v2" in text
    assert "customer_360_refresh" not in text
    assert "ad_hoc_backfill" not in text
    # every tag in use is a choice
    full = page_text(admin_client, changelist("dag"))
    for tag in ("orders", "warehouse", "customers"):
        assert f"?tag={tag}" in full


def test_the_overview_counts_files_that_failed_to_import(admin_client, dags):
    assert "failed to import" not in admin_client.get(INDEX).content.decode()

    DagImportError.objects.create(filename="/srv/dags/broken_a.py", stacktrace="SyntaxError")
    DagImportError.objects.create(filename="/srv/dags/broken_b.py", stacktrace="ImportError")
    html = admin_client.get(INDEX).content.decode()

    assert "<b>2</b> DAG files failed to import" in html
    assert changelist("dagimporterror") in html
