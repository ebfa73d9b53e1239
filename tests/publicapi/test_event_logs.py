"""``GET /api/v2/eventLogs`` and ``/eventLogs/{event_log_id}``: Airflow 3.3.2's shapes,
filters, ordering and 404."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from airflow_client.client.models.event_log_collection_response import (
    EventLogCollectionResponse,
)
from airflow_client.client.models.event_log_response import EventLogResponse

from assets_app.models import EventLog

pytestmark = pytest.mark.django_db


def at(day: int) -> datetime:
    return datetime(2026, 12, day, 9, tzinfo=UTC)


@pytest.fixture
def rows() -> list[EventLog]:
    made = [
        EventLog(event="trigger_dag_run", dag_id="sales", run_id="r1", owner="alice", dttm=at(1)),
        EventLog(event="patch_dag", dag_id="sales", owner="bob", dttm=at(2), extra="{}"),
        EventLog(
            event="post_clear_task_instances",
            dag_id="finance",
            task_id="load",
            run_id="r2",
            map_index=-1,
            try_number=2,
            owner="alice",
            dttm=at(3),
        ),
        EventLog(event="post_variable", owner="carol", dttm=at(4), extra='{"value": "***"}'),
    ]
    return EventLog.objects.bulk_create(made)


def ids(response) -> list[int]:
    assert response.status_code == 200, response.content
    return [e["event_log_id"] for e in response.json()["event_logs"]]


def test_list_shape_parses_in_airflows_client(rows, admin_api):
    body = admin_api.get("eventLogs").json()

    assert body["total_entries"] == 4
    assert set(body["event_logs"][0]) == set(EventLogResponse.model_fields) - {"id", "dttm"} | {
        "event_log_id",
        "when",
    }
    parsed = EventLogCollectionResponse.from_dict(body)
    assert [e.event for e in parsed.event_logs] == [r.event for r in rows]  # by id
    assert parsed.event_logs[0].when == at(1)


def test_detail_and_airflows_404(rows, admin_api):
    found = admin_api.get(f"eventLogs/{rows[2].pk}")
    missing = admin_api.get("eventLogs/999999")

    detail = EventLogResponse.from_dict(found.json())
    assert (detail.dag_id, detail.task_id, detail.map_index, detail.try_number) == (
        "finance",
        "load",
        -1,
        2,
    )
    assert missing.status_code == 404
    assert missing.json() == {"detail": "The Event Log with id: `999999` not found"}


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        pytest.param({"dag_id": "sales"}, [0, 1], id="dag_id"),
        pytest.param({"task_id": "load"}, [2], id="task_id"),
        pytest.param({"run_id": "r1"}, [0], id="run_id"),
        pytest.param({"map_index": -1}, [2], id="map_index"),
        pytest.param({"try_number": 2}, [2], id="try_number"),
        pytest.param({"owner": "alice"}, [0, 2], id="owner"),
        pytest.param({"event": "patch_dag"}, [1], id="event"),
        pytest.param({"excluded_events": ["patch_dag", "post_variable"]}, [0, 2], id="excluded"),
        pytest.param({"included_events": ["patch_dag", "post_variable"]}, [1, 3], id="included"),
        pytest.param({"before": "2026-12-02T09:00:00Z"}, [0], id="before-strict"),
        pytest.param({"after": "2026-12-03T09:00:00Z"}, [3], id="after-strict"),
        pytest.param({"dag_id_pattern": "ALE"}, [0, 1], id="dag_id_pattern"),
        pytest.param({"event_pattern": "variable|clear"}, [2, 3], id="event_pattern-or"),
        pytest.param({"owner_pattern": "~"}, [0, 1, 2, 3], id="pattern-all"),
        pytest.param({"task_id_pattern": "oa"}, [2], id="task_id_pattern"),
        pytest.param({"run_id_pattern": "r"}, [0, 2], id="run_id_pattern"),
        pytest.param({"dag_id_prefix_pattern": "fin"}, [2], id="dag_id_prefix"),
        pytest.param({"event_prefix_pattern": "post_"}, [2, 3], id="event_prefix"),
        pytest.param({"owner_prefix_pattern": "car"}, [3], id="owner_prefix"),
        pytest.param({"task_id_prefix_pattern": "lo"}, [2], id="task_id_prefix"),
        pytest.param({"run_id_prefix_pattern": "r2"}, [2], id="run_id_prefix"),
    ],
)
def test_filters(rows, admin_api, params, expected):
    assert ids(admin_api.get("eventLogs", params)) == [rows[i].pk for i in expected]


@pytest.mark.parametrize(
    ("order_by", "expected"),
    [
        pytest.param("-when", [3, 2, 1, 0], id="-when"),
        pytest.param("dttm", [0, 1, 2, 3], id="dttm"),
        pytest.param("-event_log_id", [3, 2, 1, 0], id="-event_log_id"),
        pytest.param("owner", [0, 2, 1, 3], id="owner-then-id"),
        pytest.param("event", [1, 2, 3, 0], id="event"),
    ],
)
def test_order_by(rows, admin_api, order_by, expected):
    assert ids(admin_api.get("eventLogs", {"order_by": order_by})) == [rows[i].pk for i in expected]


def test_order_by_an_unknown_field_is_airflows_400(rows, admin_api):
    response = admin_api.get("eventLogs", {"order_by": "owner_display_name"})

    assert response.status_code == 400
    assert "owner_display_name" in response.json()["detail"]


def test_limit_and_offset(rows, admin_api):
    body = admin_api.get("eventLogs", {"limit": 2, "offset": 1}).json()

    assert [e["event_log_id"] for e in body["event_logs"]] == [rows[1].pk, rows[2].pk]
    assert body["total_entries"] == 4


def test_a_reader_may_read_and_anonymous_may_not(rows, reader_api, anonymous_api):
    assert reader_api.get("eventLogs").status_code == 200
    assert anonymous_api.get("eventLogs").status_code == 401
