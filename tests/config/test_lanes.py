"""The suite's two lanes (tests/lanes.py): what counts as starting a process, the guard that
fails a test not marked ``slow`` for starting one, and the marks put at collection."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.lanes import (
    PROCESS_FIXTURES,
    PROCESS_PATHS,
    ProcessGuard,
    ProcessStartedError,
    process_program,
)
from tests.live_server import REPO


@pytest.mark.parametrize(
    ("argv", "kwargs", "program"),
    [
        pytest.param([sys.executable, "-c", "pass"], {}, sys.executable, id="this-python"),
        pytest.param(["/usr/bin/python3.11", "x.py"], {}, "/usr/bin/python3.11", id="a-python"),
        pytest.param(["gunicorn", "config.wsgi"], {}, "gunicorn", id="gunicorn"),
        pytest.param(["./manage.py", "worker"], {}, "./manage.py", id="manage.py"),
        pytest.param(["/usr/bin/env", "python3", "-V"], {}, "python3", id="env-python"),
        pytest.param(["sh", "-c", "cd x && airflow dags list"], {}, "airflow", id="sh-airflow"),
        pytest.param(
            "cd /tmp && .venv/bin/python manage.py demo",
            {"shell": True},
            ".venv/bin/python",
            id="shell-line",
        ),
        pytest.param(["/usr/bin/chromedriver", "--port=0"], {}, "/usr/bin/chromedriver", id="cd"),
        pytest.param(["x"], {"executable": sys.executable}, sys.executable, id="executable"),
        pytest.param(["make", "-n", "test"], {}, None, id="make"),
        pytest.param(["git", "status"], {}, None, id="git"),
        pytest.param(["psql", "-c", "SELECT 1"], {}, None, id="psql"),
    ],
)
def test_a_program_is_a_process_of_the_slow_lane_by_its_name(argv, kwargs, program):
    assert process_program(argv, kwargs.get("executable"), kwargs.get("shell", False)) == program


def test_the_guard_refuses_a_python_and_a_fork_and_lets_other_programs_run():
    guard = ProcessGuard()
    before, fork = subprocess.Popen.__init__, os.fork

    with guard.active():
        with pytest.raises(ProcessStartedError, match="not marked slow"):
            subprocess.run([sys.executable, "-c", "pass"], check=True)
        assert os.fork is not fork  # else the call below would fork pytest itself
        with pytest.raises(ProcessStartedError, match=r"os\.fork"):
            os.fork()
        assert subprocess.run(["true"], check=False).returncode == 0

    assert len(guard.started) == 2
    assert (subprocess.Popen.__init__, os.fork) == (before, fork)  # put back as they were


def test_this_test_runs_guarded():
    # a test not marked slow: the lane's own guard refuses before anything starts
    with pytest.raises(ProcessStartedError):
        subprocess.run([sys.executable, "-c", "pass"], check=True)


def test_every_test_using_a_process_fixture_is_marked_slow(request):
    # in the fast lane they have been deselected (so the marks came first); else all marked
    unmarked = [
        item.nodeid
        for item in request.session.items
        if PROCESS_FIXTURES.intersection(getattr(item, "fixturenames", ()))
        and not item.get_closest_marker("slow")
    ]

    assert unmarked == []


@pytest.mark.parametrize("entry", PROCESS_PATHS)
def test_every_process_path_names_a_directory_module_or_test_that_exists(entry):
    path, _, name = entry.partition("::")
    assert (REPO / path).exists(), entry
    if name:
        assert f"def {name}" in Path(REPO / path).read_text(), entry
