"""The committed Airflow reference (``airflow_reference/states.json``) cannot drift from Airflow:
one small example file is recorded again, with Airflow itself (``record.py``: ``airflow dags
test`` on a scratch metadata database), and must give exactly the committed states."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.runtime.worker.airflow_reference.record import EXAMPLES, STATES

pytestmark = pytest.mark.slow

FILE = "example_skip_dag.py"  # one DAG, eight tasks: skips, trigger rules, a branch


@pytest.mark.skipif(
    importlib.util.find_spec("airflow.example_dags") is None,
    reason="apache-airflow-core is not installed",
)
@pytest.mark.timeout(900)
def test_recording_again_with_airflow_gives_the_committed_states(tmp_path: Path):
    out = tmp_path / "states.json"
    done = subprocess.run(
        [sys.executable, str(STATES.parent / "record.py"), FILE, "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=850,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-5000:]
    committed = json.loads(STATES.read_text())
    recorded = json.loads(out.read_text())
    assert recorded["airflow_version"] == committed["airflow_version"]
    assert recorded["files"] == {FILE: committed["files"][FILE]}
    assert recorded["files"][FILE]["example_skip_dag"]["tasks"]  # states were read
    assert set(committed["files"]) == set(EXAMPLES)
