"""The operator API's ``POST /api/v1/dags/{dag_id}/runs``: Airflow's *trigger*, permission
checked, 201 with the run; every refusal writes nothing."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from assets_app.models import DagRun
from tests.live_server import REPO
from tests.operatorapi.conftest import VIEW_PERMISSIONS

pytestmark = pytest.mark.django_db

PRODUCER = "asset_s3_bucket_producer"


@pytest.fixture
def seed() -> None:
    call_command("declare_dags", str(REPO / "examples" / "dags.yaml"), stdout=StringIO())


def test_the_operator_api_triggers_with_permission(seed, client_for):
    url = f"/api/v1/dags/{PRODUCER}/runs"
    reader = client_for("reader", *VIEW_PERMISSIONS)
    refused = reader.post(url, {"run_id": "r1"}, format="json")
    assert refused.status_code == 403
    assert "assets_app.add_dagrun" in refused.json()["detail"]

    trigger = client_for("trigger", *VIEW_PERMISSIONS, "add_dagrun")
    created = trigger.post(url, {"run_id": "r1", "conf": {"a": 1}}, format="json")
    assert created.status_code == 201, created.content
    assert created.json()["run_id"] == "r1"
    assert created.json()["state"] == "running"  # started at once: its DAG has room
    assert created.json()["conf"] == {"a": 1}

    taken = trigger.post(url, {"run_id": "r1"}, format="json")
    assert taken.status_code == 409
    assert taken.json()["code"] == "dag_run_exists"
    bad = trigger.post(url, {"logical_date": "9999-12-31T23:59:59-05:00"}, format="json")
    assert bad.status_code == 400
    assert "logical_date" in bad.json()
    unknown_field = trigger.post(url, {"runid": "x"}, format="json")
    assert unknown_field.status_code == 400
    assert "runid" in unknown_field.json()
    assert trigger.post("/api/v1/dags/nope/runs", {}, format="json").status_code == 404
    assert list(DagRun.objects.values_list("run_id", flat=True)) == ["r1"]


@pytest.mark.parametrize("offset", ["+20:00", "-23:59", "+15:59"])
def test_a_logical_date_with_any_offset_python_reads_is_the_same_time_in_utc(
    seed, client_for, offset
):
    """Python reads offsets up to ±23:59, PostgreSQL stores up to ±15:59: the time is taken in
    UTC, so a far offset is a run at that instant, not a 500."""
    from datetime import UTC, datetime

    trigger = client_for("trigger", *VIEW_PERMISSIONS, "add_dagrun")
    when = f"2026-03-01T10:00:00{offset}"

    created = trigger.post(
        f"/api/v1/dags/{PRODUCER}/runs", {"run_id": "far", "logical_date": when}, format="json"
    )

    assert created.status_code == 201, created.content
    stored = DagRun.objects.get(run_id="far").logical_date
    assert stored == datetime.fromisoformat(when).astimezone(UTC)
