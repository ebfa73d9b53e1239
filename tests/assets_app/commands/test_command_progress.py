"""Long commands on a terminal and in scripts: ``declare_dags`` and ``prune_asset_events``
show a progress bar on stderr only when stderr is a terminal; their results are on stdout,
bar-free; log lines go to stderr, printed above the bar, never into it."""

from __future__ import annotations

import fcntl
import io
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from assets_app.management.commands import prune_asset_events
from assets_app.models import AssetEvent, Dag
from assets_app.services.assets.events import PruneProgress
from tests.factories import AssetEventFactory
from tests.live_server import REPO, server_env

MANIFEST = REPO / "examples" / "dags.yaml"
#: The start of a log line of the project's LOGGING format ("%(asctime)s %(levelname)s …").
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO ")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def old_events(count: int) -> None:
    for _ in range(count):
        AssetEventFactory(timestamp=timezone.now() - timedelta(days=40))


def run(command: str, *args: str, stderr: io.StringIO) -> str:
    out = io.StringIO()
    call_command(command, *args, stdout=out, stderr=stderr)
    return out.getvalue()


# --- in process ----------------------------------------------------------------------------


@pytest.mark.django_db
def test_prune_on_a_terminal_draws_its_bar_on_stderr_and_its_result_on_stdout():
    old_events(5)
    err = _Terminal()

    out = run("prune_asset_events", "--older-than-days=30", "--batch-size=2", stderr=err)

    assert out.startswith("Deleted 5 asset event(s) older than")
    assert out.count("\n") == 1
    assert "\r" not in out
    bar = err.getvalue()
    assert "\r" in bar
    assert "5/5" in bar
    assert "deleted=5, kept=0" in bar


@pytest.mark.django_db
@pytest.mark.parametrize("dry_run", [False, True])
def test_prune_shows_counts_as_integers(monkeypatch, dry_run):
    big = PruneProgress(total=20000, examined=20000, deleted=20000, kept_unconsumed=12000)

    def prune(*, progress, **kwargs):
        progress(PruneProgress(total=20000))
        progress(big)
        return big

    monkeypatch.setattr(prune_asset_events, "asset_events_prune", prune)
    err = _Terminal()

    args = ["--older-than-days=30", *(["--dry-run"] if dry_run else [])]
    out = run("prune_asset_events", *args, stderr=err)

    done = "would delete" if dry_run else "deleted"
    assert f"{done}=20000, kept=12000" in err.getvalue()
    assert "e+" not in err.getvalue()
    assert "20000/20000" in err.getvalue()
    assert "20000" in out


@pytest.mark.django_db
def test_prune_in_a_script_prints_no_bar():
    old_events(3)
    err = io.StringIO()

    out = run("prune_asset_events", "--older-than-days=30", "--batch-size=2", stderr=err)

    assert out.startswith("Deleted 3 asset event(s)")
    assert out.count("\n") == 1
    assert err.getvalue() == ""


@pytest.mark.django_db
def test_declare_on_a_terminal_draws_its_steps_on_stderr():
    err = _Terminal()

    out = run("declare_dags", str(MANIFEST), stderr=err)

    assert out.startswith("Declared ")
    assert out.count("\n") == 1
    assert "\r" not in out
    assert "7/7" in err.getvalue()
    assert "declaring" in err.getvalue()
    assert Dag.objects.exists()


@pytest.mark.django_db
def test_declare_in_a_script_prints_no_bar(tmp_path):
    err = io.StringIO()

    out = run("declare_dags", str(MANIFEST), stderr=err)

    assert out.startswith("Declared ")
    assert out.count("\n") == 1
    assert "\r" not in err.getvalue()
    assert "declaring" not in err.getvalue()


@pytest.mark.django_db
def test_a_failing_load_closes_the_bar_and_stores_nothing(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("dags: [{dag_id: 'no spaces allowed'}]\n")
    err = _Terminal()

    with pytest.raises(CommandError, match="no spaces allowed"):
        run("declare_dags", str(bad), stderr=err)

    assert "declaring" in err.getvalue()
    assert err.getvalue().endswith("\n")  # closed: the error message starts on a new line
    assert not Dag.objects.exists()


# --- real processes on a pseudo-terminal ---------------------------------------------------


def on_a_terminal(tmp_path: Path, *args: str) -> tuple[str, str]:
    """Run ``manage.py *args`` with stderr on a pseudo-terminal and stdout on a pipe, INFO
    logging on (the test settings log warnings only); (stdout, what the terminal showed)."""
    (tmp_path / "info_logging_settings.py").write_text(
        "from config.settings.test import *  # noqa: F403\n"
        'LOGGING = {**LOGGING, "root": {"handlers": ["console"], "level": "INFO"}}  # noqa: F405\n'
    )
    env = server_env(
        DJANGO_SETTINGS_MODULE="info_logging_settings", PYTHONPATH=f"{REPO}{os.pathsep}{tmp_path}"
    )
    controller, terminal = pty.openpty()
    # 30 rows, 120 columns: a new pseudo-terminal has none, and tqdm fits its bar to them
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 120, 0, 0))
    child = subprocess.Popen(
        [sys.executable, "manage.py", *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=terminal,
    )
    os.close(terminal)
    shown = b""
    while True:
        ready, _, _ = select.select([controller], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(controller, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        shown += chunk
    os.close(controller)
    assert child.stdout is not None
    out = child.stdout.read().decode()
    assert child.wait(timeout=60) == 0, shown.decode()
    return out, shown.decode()


def log_lines(shown: str) -> list[str]:
    """The log lines the terminal shows, each as written after the bar was cleared."""
    pieces = [piece for line in shown.split("\n") for piece in line.split("\r")]
    return [piece for piece in pieces if LOG_LINE.match(piece)]


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_prune_on_a_real_terminal(tmp_path: Path):
    old_events(4)

    out, shown = on_a_terminal(
        tmp_path, "prune_asset_events", "--older-than-days=30", "--batch-size=3"
    )

    assert out.startswith("Deleted 4 asset event(s)")
    assert out.count("\n") == 1
    assert "\r" not in out
    assert "4/4" not in out
    assert "4/4" in shown
    assert "deleted=4, kept=0" in shown
    # the service's log line, on a line of its own above the bar (not glued to it)
    assert any("pruned 4 asset event(s)" in line for line in log_lines(shown)), shown
    assert not AssetEvent.objects.exists()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_declare_on_a_real_terminal(tmp_path: Path):
    out, shown = on_a_terminal(tmp_path, "declare_dags", str(MANIFEST))

    assert out.startswith("Declared ")
    assert out.count("\n") == 1
    assert "\r" not in out
    assert "7/7" in shown
    assert any("declared" in line and "DAG(s) from" in line for line in log_lines(shown)), shown


@pytest.mark.django_db
@pytest.mark.slow
def test_a_dag_folder_load_on_a_terminal_counts_its_files_on_stderr(tmp_path):
    (tmp_path / "one.py").write_text(
        "import pendulum\nfrom airflow.sdk import DAG, task\n\n"
        "with DAG('folder_one', schedule=None, start_date=pendulum.datetime(2026, 1, 1)):\n"
        "    @task\n    def t():\n        pass\n\n    t()\n"
    )
    (tmp_path / "broken.py").write_text("from airflow.sdk import DAG\nthis is not python\n")
    err = _Terminal()
    stdout = io.StringIO()

    # the broken file fails the command (exit status 1) after every file was loaded
    with pytest.raises(CommandError, match=r"broken\.py"):
        call_command("declare_dags", "--dags-folder", str(tmp_path), stdout=stdout, stderr=err)
    out = stdout.getvalue()

    # one line per file and the summary on stdout, no bar in it; the bar counts on stderr
    assert "\r" not in out
    assert out.splitlines()[-1].startswith(f"Loaded {tmp_path}: 2 file(s)")
    assert "loading" in err.getvalue()
    assert "2file" in err.getvalue().replace(" ", "")
    assert Dag.objects.filter(dag_id="folder_one").exists()
