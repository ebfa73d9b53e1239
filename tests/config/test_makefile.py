"""``make`` installs only when ``pyproject.toml`` changed: a stamp in the venv per install.

Dry runs (``make -n``) against a throw-away venv directory, so nothing is installed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.live_server import REPO

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")

PYPROJECT = REPO / "pyproject.toml"


def dry_run(venv: Path, target: str) -> str:
    result = subprocess.run(
        ["make", "-n", "--no-print-directory", "-C", str(REPO), f"VENV={venv}", target],
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout


@pytest.fixture
def venv(tmp_path: Path) -> Path:
    """A venv directory whose python exists (make would otherwise create the venv)."""
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python").touch()
    return tmp_path


def stamp(venv: Path, name: str, *, seconds_after_pyproject: float) -> None:
    path = venv / name
    path.touch()
    when = PYPROJECT.stat().st_mtime + seconds_after_pyproject
    os.utime(path, (when, when))


@pytest.mark.parametrize(
    ("target", "stamp_name", "extras"),
    [
        ("install", ".installed", '-e ".[airflow]"'),
        ("install-test", ".installed-test", '-e ".[test,airflow,docs]"'),
    ],
)
def test_an_install_runs_only_when_pyproject_is_newer_than_its_stamp(
    venv, target, stamp_name, extras
):
    assert f"pip install --quiet {extras}" in dry_run(venv, target)  # never installed

    stamp(venv, stamp_name, seconds_after_pyproject=10)
    assert "pip install" not in dry_run(venv, target)

    stamp(venv, stamp_name, seconds_after_pyproject=-10)  # pyproject.toml changed since
    assert f"pip install --quiet {extras}" in dry_run(venv, target)


def test_the_test_install_also_stamps_the_plain_one(venv):
    commands = dry_run(venv, "install-test")

    assert f"touch {venv}/.installed-test {venv}/.installed" in commands


def test_run_after_an_install_goes_straight_to_the_server(venv):
    stamp(venv, ".installed", seconds_after_pyproject=10)

    commands = dry_run(venv, "run").splitlines()

    assert not any("pip" in line for line in commands)
    assert commands[0].endswith("manage.py migrate --no-input")


def test_run_loads_the_example_manifest_and_the_example_dag_folder(venv):
    stamp(venv, ".installed", seconds_after_pyproject=10)

    commands = dry_run(venv, "run")

    assert "manage.py declare_dags examples/dags.yaml" in commands
    assert "manage.py declare_dags --dags-folder examples/dags" in commands
    assert commands.index("--dags-folder") < commands.index("ensure_admin")
