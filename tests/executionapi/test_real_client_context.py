"""The real ``apache-airflow-task-sdk`` client against a live server: ``assets/by-alias``,
``previous-successful-dagrun`` and a reschedule followed by ``task-reschedules/{id}/start_date``.
Skipped when ``apache-airflow-task-sdk`` is not installed."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from assets_app.models import AssetAliasAsset, TaskReschedule
from assets_app.tokens import token_issue
from tests.executionapi.conftest import airflow_env
from tests.factories import AssetAliasFactory, AssetFactory, DagFactory, DagRunFactory

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SCRIPT = Path(__file__).with_name("real_client_context_script.py")


def test_real_client_reads_context_routes_and_a_recorded_reschedule(
    airflow_sdk, server, make_ti, tmp_path
):
    # given an alias with one asset, an earlier successful run and a running sensor
    alias = AssetAliasFactory(name="my_alias")
    AssetAliasAsset.objects.create(alias=alias, asset=AssetFactory(name="aliased", uri="s3://a"))
    dag = DagFactory(dag_id="producer")
    DagRunFactory(
        dag=dag,
        state="success",
        logical_date=datetime(2026, 1, 1, tzinfo=UTC),
        end_date=datetime(2026, 1, 1, 1, tzinfo=UTC),
    )
    ti = make_ti(dag_run=DagRunFactory(dag=dag, logical_date=datetime(2026, 1, 2, tzinfo=UTC)))

    # when the real client reads the routes and reports a reschedule
    result = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            f"{server.url}/execution",
            token_issue(task_instance_id=ti.pk),
            str(ti.pk),
        ],
        env=airflow_env(tmp_path),
        capture_output=True,
        timeout=180,
        check=False,
    )

    # then each answer parsed in the SDK's own models
    assert result.returncode == 0, result.stderr.decode()[-3000:] + server.log()[-3000:]
    out = json.loads(result.stdout.decode().strip().splitlines()[-1])
    assert out["alias_assets"] == ["aliased"]
    assert out["prev_end"] == "2026-01-01T01:00:00+00:00"
    assert out["first_start"] is None
    assert datetime.fromisoformat(out["first_start_after"]) == ti.start_date
    ti.refresh_from_db()
    assert ti.state == "up_for_reschedule"
    assert TaskReschedule.objects.filter(ti_id=ti.pk).count() == 1
