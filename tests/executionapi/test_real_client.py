"""The real ``apache-airflow-task-sdk`` 1.3.x HTTP client against a live server process.

The client runs in a subprocess so that Airflow's configuration and logging stay out of the
test process. Skipped when ``apache-airflow-task-sdk`` is not installed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from assets_app.models import Asset, AssetAliasAsset, AssetAliasAssetEvent, AssetEvent, XCom
from assets_app.tokens import token_issue
from tests.executionapi.conftest import airflow_env

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SCRIPT = Path(__file__).with_name("real_client_script.py")


def test_real_airflow_client_runs_a_task_to_success(
    airflow_sdk, server, declare, make_ti, tmp_path
):
    # given declared outlets and a queued task instance
    declare(
        """
dags:
  - dag_id: producer
    tasks:
      - task_id: produce
        outlets: [{asset: {name: asset_one, uri: "s3://bucket/one"}}, {alias: my_alias}]
"""
    )
    ti = make_ti(state="queued")

    # when the real client starts it, heartbeats, pushes an XCom and reports success
    result = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            f"{server.url}/execution",
            token_issue(task_instance_id=ti.pk),
            str(ti.pk),
            ti.dag_id,
            ti.run_id,
            ti.task_id,
        ],
        env=airflow_env(tmp_path),
        capture_output=True,
        timeout=180,
        check=False,
    )

    # then every call succeeded and the rows are there
    assert result.returncode == 0, result.stderr.decode()[-3000:] + server.log()[-3000:]
    out = json.loads(result.stdout.decode().strip().splitlines()[-1])
    assert out["run_id"] == ti.run_id
    assert out["already_running"] is True
    assert out["inactive"] == []
    assert out["asset"]["name"] == "asset_one"
    assert out["xcom"] == {"answer": 42}
    assert out["events"] == [{"k": "v"}]
    assert out["alias_events"] == ["dyn_asset"]
    ti.refresh_from_db()
    assert ti.state == "success"
    assert ti.rendered_fields == {"op_kwargs": "{}"}
    assert AssetEvent.objects.count() == 2
    dyn = Asset.objects.get(name="dyn_asset")
    assert dyn.extra == {"asset_level": "x"}
    assert AssetAliasAsset.objects.filter(asset=dyn, alias__name="my_alias").count() == 1
    assert AssetAliasAssetEvent.objects.count() == 1
    assert XCom.objects.get().value == {"answer": 42}
