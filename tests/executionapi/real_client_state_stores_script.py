"""Run by test_real_client_state_stores.py in a subprocess: the real
``apache-airflow-task-sdk`` client's task and asset state store operations against the live
server, one JSON line out."""

from __future__ import annotations

import json
import math
import sys
import uuid
from datetime import UTC, datetime
from typing import Any

from airflow.sdk.api.client import Client, ServerResponseError
from airflow.sdk.api.datamodels._generated import AssetStateStoreResponse, TaskStateStoreResponse
from airflow.sdk.execution_time.comms import ErrorResponse

NAME = "orders/daily"
URI = "s3://warehouse/orders/daily"


def status_of(call: Any) -> int | str:
    """The HTTP status a call failed with, or ``ok``."""
    try:
        call()
    except ServerResponseError as exc:
        return exc.response.status_code
    return "ok"


def value_of(answer: Any) -> Any:
    if isinstance(answer, TaskStateStoreResponse | AssetStateStoreResponse):
        return answer.value
    assert isinstance(answer, ErrorResponse), answer
    return answer.error.value


def main() -> None:
    base_url, ti_id, token, other_id, other_token, finished_token = sys.argv[1:7]
    ti = uuid.UUID(ti_id)
    out: dict[str, Any] = {}
    with Client(base_url=base_url, token=token) as client:
        tasks = client.task_state_store
        tasks.set(ti, "job/id", {"id": "job-1", "rows": [1, 2]}, expires_at=None)
        tasks.set(ti, "status", "running", expires_at=datetime(2030, 1, 1, tzinfo=UTC))
        tasks.set(ti, "gone", 1, expires_at=None)
        out["task_get"] = value_of(tasks.get(ti, "job/id"))
        out["task_status"] = value_of(tasks.get(ti, "status"))
        tasks.delete(ti, "gone")
        out["task_deleted"] = value_of(tasks.get(ti, "gone"))
        out["task_nan"] = status_of(lambda: tasks.set(ti, "k", math.nan, expires_at=None))
        out["task_other"] = status_of(lambda: tasks.get(uuid.UUID(other_id), "job/id"))

        assets = client.asset_state_store
        assets.set("watermark", "2026-01-01", name=NAME)
        assets.set("runs", 1, uri=URI)
        out["asset_by_uri"] = value_of(assets.get("watermark", uri=URI))
        out["asset_by_name"] = value_of(assets.get("runs", name=NAME))
        assets.delete("watermark", uri=URI)
        out["asset_deleted"] = value_of(assets.get("watermark", name=NAME))
        out["asset_unknown_get"] = value_of(assets.get("k", name="nope"))
        out["asset_unknown_set"] = status_of(lambda: assets.set("k", 1, name="nope"))
    with Client(base_url=base_url, token=finished_token) as finished:
        out["finished_asset_read"] = value_of(finished.asset_state_store.get("runs", uri=URI))
        out["finished_asset_set"] = status_of(
            lambda: finished.asset_state_store.set("runs", 2, name=NAME)
        )
        out["finished_asset_clear"] = status_of(lambda: finished.asset_state_store.clear(uri=URI))
    with Client(base_url=base_url, token=other_token) as other:
        # the other task instance clears its own store and an asset's
        other.task_state_store.clear(uuid.UUID(other_id))
        other.asset_state_store.clear(name=NAME)
        out["asset_cleared"] = value_of(other.asset_state_store.get("runs", name=NAME))
    with Client(base_url=base_url, token=token) as client:
        client.task_state_store.clear(ti)
        out["task_cleared"] = value_of(client.task_state_store.get(ti, "job/id"))
    sys.stdout.write(json.dumps(out, default=str) + "\n")


if __name__ == "__main__":
    main()
