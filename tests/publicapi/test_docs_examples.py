"""``docs/public-api.md``'s ``bash`` blocks, run in order in one shell against a live server
(curl, python3 and airflowctl, as a reader would), with ``set -euo pipefail``: every command
must succeed. Only the first block's ``export`` line is replaced, by the live server's URL and
the test admin's password; everything else runs verbatim."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

from assets_app.models import Connection, Dag, DagRun, DagRunNote, Variable
from assets_app.selectors.secrets import connection_secrets, variable_value
from tests.live_server import REPO

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

DOC = REPO / "docs" / "public-api.md"
EXPORT = "export AIRFLOW=http://127.0.0.1:8000 USERNAME=admin PASSWORD=the-printed-password"


def doc_blocks() -> list[str]:
    return re.findall(r"```bash\n(.*?)```", DOC.read_text(), re.DOTALL)


def test_the_docs_examples_run_as_written(server, tmp_path):
    # given the example DAGs and an admin, as `make run` leaves them
    call_command("declare_dags", str(REPO / "examples" / "dags.yaml"), stdout=StringIO())
    User.objects.create_superuser("admin", "admin@example.com", "pw-of-the-test")
    assert Dag.objects.get(dag_id="asset_s3_bucket_consumer").is_paused is False
    blocks = doc_blocks()
    assert len(blocks) >= 5
    assert EXPORT in blocks[0]
    script = "\n".join(blocks).replace(
        EXPORT, f"export AIRFLOW={server.url} USERNAME=admin PASSWORD=pw-of-the-test"
    )

    # when
    ran = subprocess.run(
        ["bash", "-c", "set -euo pipefail\n" + script],
        # airflowctl from this environment, its URL file in a home of the test's own
        env={
            **os.environ,
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
            "AIRFLOW_HOME": str(tmp_path / "airflow_home"),
            "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring",  # none, as headless
        },
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    # then every command succeeded, and did what the page says
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "s3cr3t" not in ran.stdout
    variable = Variable.objects.get(key="warehouse_settings")
    assert json.loads(variable_value(variable) or "") == {
        "schema": "analytics",
        "api_token": "s3cr3t",
    }
    assert variable.description == "read by the exports"
    connection = Connection.objects.get(conn_id="warehouse")
    assert connection.host == "db2.example.com"
    assert connection_secrets(connection).password == "s3cr3t"
    marked = DagRun.objects.get(run_id="docs_example")
    assert marked.state == "failed"
    assert DagRunNote.objects.get(dag_run=marked).content.startswith("stopped by hand")
    assert marked.task_instances.get().state == "skipped"
    materialized = DagRun.objects.exclude(run_id="docs_example").get()
    assert (materialized.dag_id, materialized.state) == ("asset_s3_bucket_producer", "running")
    # airflowctl, without a keyring: it listed the DAGs and paused one
    assert '"dag_id": "asset_s3_bucket_consumer"' in ran.stdout
    assert Dag.objects.get(dag_id="asset_s3_bucket_consumer").is_paused is True
