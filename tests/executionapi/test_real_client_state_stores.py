"""The real Airflow task SDK client's ``task_state_store`` and ``asset_state_store``
operations (what ``context["task_state_store"]`` and ``context["asset_state_store"]`` call)
against a live server process, the client in a subprocess as in test_real_client.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from assets_app.models import AssetStateStore, TaskInstanceState, TaskStateStore
from assets_app.services.state.state_stores import task_state_set
from assets_app.tokens import token_issue
from tests.executionapi.conftest import airflow_env

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SCRIPT = Path(__file__).with_name("real_client_state_stores_script.py")
MANIFEST = """
dags:
  - dag_id: producer
    tasks:
      - task_id: produce
        outlets: [{asset: {name: orders/daily, uri: "s3://warehouse/orders/daily"}}]
"""


def test_real_client_reads_and_writes_the_task_and_asset_stores(
    airflow_sdk, server, declare, make_ti, tmp_path
):
    # given a declared asset, two running task instances (one with a stored key) and a
    # finished one
    declare(MANIFEST)
    ti = make_ti(dag_id="producer", task_id="produce")
    other = make_ti(dag_id="other")
    task_state_set(task_instance_id=other.pk, key="mine", value=1)
    finished = make_ti(dag_id="done", state=TaskInstanceState.SUCCESS)

    # when the real client drives every store route
    result = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            f"{server.url}/execution",
            str(ti.pk),
            token_issue(task_instance_id=ti.pk),
            str(other.pk),
            token_issue(task_instance_id=other.pk),
            token_issue(task_instance_id=finished.pk),
        ],
        env=airflow_env(tmp_path),
        capture_output=True,
        timeout=180,
        check=False,
    )

    # then every call got Airflow's answer
    assert result.returncode == 0, result.stderr.decode()[-3000:] + server.log()[-3000:]
    out = json.loads(result.stdout.decode().strip().splitlines()[-1])
    assert out == {
        "task_get": {"id": "job-1", "rows": [1, 2]},
        "task_status": "running",
        "task_deleted": "TASK_STORE_NOT_FOUND",
        # pydantic sends NaN as null, which the store refuses as Airflow does
        "task_nan": 422,
        "task_other": 403,
        "asset_by_uri": "2026-01-01",
        "asset_by_name": 1,
        "asset_deleted": "ASSET_STORE_NOT_FOUND",
        "asset_unknown_get": "ASSET_STORE_NOT_FOUND",
        "asset_unknown_set": 404,
        "finished_asset_read": 1,
        "finished_asset_set": 403,
        "finished_asset_clear": 403,
        "asset_cleared": "ASSET_STORE_NOT_FOUND",
        "task_cleared": "TASK_STORE_NOT_FOUND",
    }
    assert not TaskStateStore.objects.exists()
    assert not AssetStateStore.objects.exists()
    assert "Traceback" not in server.log()
