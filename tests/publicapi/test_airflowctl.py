"""``airflowctl`` (Airflow's CLI, as installed with the ``airflow`` extra) against a live server
on a headless machine, as docs/api-v2.md gives it: ``auth token`` prints a JWT,
``AIRFLOW_CLI_TOKEN`` carries it, ``auth login --skip-keyring`` keeps only the URL (no keyring
backend needed), then every group the docs name — dags, dagrun, assets, pools, variables,
connections — on a tagged, scheduled DAG file's DAG."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

from assets_app.models import Dag
from assets_app.selectors.secrets import variable_get, variable_value
from assets_app.services.secrets.connections import ConnectionFields, connection_create
from assets_app.services.secrets.variables import variable_set
from tests.factories import DagRunFactory
from tests.publicapi.test_airflow_client import AIRFLOWCTL
from tests.runtime.worker.conftest import dags_folder_load

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

DAG_ID = "finance_orders_daily_export"


class Ctl:
    """Runs airflowctl as a headless machine would: no keyring, the token in the environment."""

    def __init__(self, home: Path) -> None:
        self.env = {**os.environ, "AIRFLOW_HOME": str(home)}
        self.env.pop("AIRFLOW_CLI_DEBUG_MODE", None)
        self.env["PYTHON_KEYRING_BACKEND"] = "keyring.backends.fail.Keyring"  # none, as headless

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(AIRFLOWCTL), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def ok(self, *args: str) -> str:
        done = self.run(*args)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        return done.stdout

    def json(self, *args: str) -> Any:
        return json.loads(self.ok(*args, "--output", "json"))


@pytest.fixture
def ctl(server, tmp_path) -> Ctl:
    User.objects.create_superuser("ops", "ops@example.com", "s3cret")
    cli = Ctl(tmp_path)
    token = cli.ok(
        "auth", "token", "--api-url", server.url, "--username", "ops", "--password", "s3cret"
    ).strip()
    assert token.count(".") == 2  # a JWT, printed alone
    cli.env["AIRFLOW_CLI_TOKEN"] = token
    cli.ok("auth", "login", "--api-url", server.url, "--skip-keyring")
    return cli


DAG_FILE = f"""
from airflow.sdk import DAG, Asset, task

with DAG(
    dag_id="{DAG_ID}",
    schedule="0 2 * * *",
    tags=["finance", "daily"],
    params={{"region": "emea"}},
):
    @task(outlets=[Asset(name="orders_daily", uri="s3://warehouse/orders/daily")])
    def export_orders():
        return "exported"

    export_orders()
"""


@pytest.fixture
def registry(db, settings, tmp_path) -> None:
    """A tagged, scheduled DAG file loaded as a user loads one, a run, a JSON variable holding a
    secret and a connection with a password."""
    folder = tmp_path / "dags"
    folder.mkdir()
    (folder / "orders.py").write_text(DAG_FILE)
    out = dags_folder_load(folder, settings=settings, parser_home=tmp_path / "parser_home")
    assert "1 declared" in out, out
    DagRunFactory(
        dag=Dag.objects.get(dag_id=DAG_ID),
        run_id="scheduled__2026-12-04T02:00:00+00:00",
        state="success",
    )
    variable_set(key="warehouse_settings", value='{"bucket": "orders", "api_token": "t0k3n"}')
    connection_create(
        conn_id="warehouse_db",
        values=ConnectionFields(conn_type="postgres", host="db.internal", password="hunter2"),
    )


def test_airflowctl_without_a_keyring_reads_and_changes_the_registry(ctl, registry):
    (dag,) = ctl.json("dags", "list")  # each DAG as an item
    assert sorted(t["name"] for t in dag["tags"]) == ["daily", "finance"]
    assert (dag["timetable_summary"], dag["timetable_description"]) == (
        "0 2 * * *",
        "At 02:00",
    )
    got = ctl.json("dags", "get", DAG_ID)
    assert got[0]["dag_id"] == DAG_ID
    (details,) = ctl.json("dags", "get-details", DAG_ID)
    assert details["fileloc"].endswith("/dags/orders.py")
    assert details["timetable_periodic"] == "True"  # airflowctl prints booleans as words
    assert details["next_dagrun_run_after"].endswith("T02:00:00Z")  # the next 02:00
    assert "emea" in json.dumps(details["params"])  # (airflowctl's printer drops the key)
    ctl.ok("dags", "next-execution", DAG_ID)
    # (airflowctl 0.1.5's dags get-tags gets the tags, then cannot print a list of strings:
    # "To tabulate non-dictionary data you need to provide `mapper` function")

    ctl.ok("dags", "pause", DAG_ID)
    assert Dag.objects.get(dag_id=DAG_ID).is_paused is True
    ctl.ok("dags", "unpause", DAG_ID)
    assert Dag.objects.get(dag_id=DAG_ID).is_paused is False

    (runs,) = ctl.json("dagrun", "list", "--limit", "10")
    assert [r["dag_run_id"] for r in runs["dag_runs"]] == ["scheduled__2026-12-04T02:00:00+00:00"]
    (assets,) = [ctl.json("assets", "list")]
    assert [a["name"] for a in assets] == ["orders_daily"]

    pools = ctl.json("pools", "list")  # each pool as an item
    assert [p["name"] for p in pools] == ["default_pool"]
    assert ctl.json("pools", "get", "default_pool")[0]["slots"] == "128"  # printed as text

    variables = ctl.json("variables", "list")
    (variable,) = variables
    assert variable["key"] == "warehouse_settings"
    assert "t0k3n" not in json.dumps(variables)  # masked, as by Airflow
    ctl.ok("variables", "create", "--key", "export_day", "--value", "2026-12-04")
    assert variable_value(variable_get(key="export_day")) == "2026-12-04"
    assert ctl.json("variables", "get", "export_day")[0]["value"] == "2026-12-04"

    connections = ctl.json("connections", "list")
    assert [c["connection_id"] for c in connections] == ["warehouse_db"]
    connection = ctl.json("connections", "get", "warehouse_db")[0]
    assert (connection["host"], connection["password"]) == ("db.internal", "***")
    assert "hunter2" not in json.dumps(connections)
