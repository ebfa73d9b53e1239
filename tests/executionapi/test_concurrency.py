"""Simultaneous successes through a real server process (2 workers x 8 threads).

On PostgreSQL rows are locked and inserted with ON CONFLICT; on SQLite writers queue for the
database lock (IMMEDIATE transactions with a timeout) instead of failing with "database is
locked". Both must end with exactly one row of each shared thing and every event kept.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from assets_app.models import (
    Asset,
    AssetAlias,
    AssetAliasAsset,
    AssetAliasAssetEvent,
    AssetEvent,
    TaskInstance,
)
from assets_app.tokens import token_issue

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

N = 32
END = "2026-11-30T04:50:58.540508Z"


def _patch_all(server, requests: list[tuple[str, dict]]) -> list[int]:
    """Send every (ti_id, body) at the same moment; return the status codes."""
    barrier = threading.Barrier(len(requests), timeout=30)

    def send(ti_id: str, body: dict) -> int:
        headers = {
            "Authorization": f"Bearer {token_issue(task_instance_id=ti_id)}",
            "Airflow-API-Version": "2026-06-30",
        }
        with httpx.Client(timeout=60) as client:
            barrier.wait()
            response = client.patch(
                f"{server.url}/execution/task-instances/{ti_id}/state", json=body, headers=headers
            )
            return response.status_code

    with ThreadPoolExecutor(max_workers=len(requests)) as pool:
        futures = [pool.submit(send, ti_id, body) for ti_id, body in requests]
        return [future.result(timeout=90) for future in futures]


def _alias_success(alias: str = "fresh_alias") -> dict:
    return {
        "state": "success",
        "end_date": END,
        "task_outlets": [{"name": alias, "uri": None, "type": "AssetAlias"}],
        "outlet_events": [
            {
                "source_alias_name": alias,
                "dest_asset_key": {"name": "fresh", "uri": "s3://bucket/fresh"},
                "dest_asset_extra": {"created": "concurrently"},
                "extra": {},
            }
        ],
        "rendered_map_index": None,
    }


def test_simultaneous_successes_create_one_asset_alias_and_link(server, make_ti):
    # given 32 running task instances whose alias events target a new asset and a new alias
    tis = [make_ti() for _ in range(N)]
    assert not Asset.objects.exists()
    assert not AssetAlias.objects.exists()

    # when they all succeed at once
    codes = _patch_all(server, [(str(ti.pk), _alias_success()) for ti in tis])

    # then
    assert codes == [204] * N, server.log()[-3000:]
    assert Asset.objects.count() == 1
    assert AssetAlias.objects.count() == 1
    assert AssetAliasAsset.objects.count() == 1
    assert AssetEvent.objects.count() == N
    assert AssetAliasAssetEvent.objects.count() == N
    assert set(AssetEvent.objects.values_list("source_run_id", flat=True)) == {
        ti.run_id for ti in tis
    }
    assert TaskInstance.objects.filter(state="success").count() == N


def test_simultaneous_successes_of_one_task_instance_register_once(server, make_ti):
    # given one running task instance
    ti = make_ti()
    body = _alias_success()
    body["outlet_events"].append(
        {
            "source_alias_name": "fresh_alias",
            "dest_asset_key": {"name": "other", "uri": "s3://bucket/other"},
            "extra": {},
        }
    )

    # when 32 identical successes arrive at once
    codes = _patch_all(server, [(str(ti.pk), body)] * N)

    # then exactly one registered, the others saw it done
    assert codes.count(204) == 1, codes
    assert set(codes) <= {204, 200, 409}, codes
    assert AssetEvent.objects.count() == 2
    assert AssetAliasAssetEvent.objects.count() == 2
    ti.refresh_from_db()
    assert ti.state == "success"
