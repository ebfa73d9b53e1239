"""docs/schedules.md, run as written: its manifest is ``examples/schedules.yaml``, and its
commands, run as processes from the repository, print what the page shows; the runs they
made are in the database, each once."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from collections import Counter

import pytest

from assets_app.models import DagRun, DagRunType, TaskInstance
from tests.live_server import REPO, server_env

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PAGE = (REPO / "docs" / "schedules.md").read_text()


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", PAGE, flags=re.DOTALL)


def run(command: str) -> str:
    """A command of the page, from the repository; its stdout (the log lines go to stderr)."""
    argv = shlex.split(command)
    assert argv[:2] == [".venv/bin/python", "manage.py"], command
    done = subprocess.run(
        [sys.executable, *argv[1:]],
        cwd=REPO,
        env=server_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_the_pages_manifest_is_the_example_file():
    assert blocks("yaml") == [(REPO / "examples" / "schedules.yaml").read_text()]


def test_the_pages_commands_print_what_it_shows():
    # given / when: the page's commands, in order
    (commands,) = blocks("sh")
    declare, first, second = commands.splitlines()
    assert "Declared 4 DAG(s)" in run(declare)
    first_out, second_out = run(first), run(second)

    # then the passes print the page's outputs
    assert blocks("text") == [first_out, second_out]

    # and the runs they report exist once each, whole, with the page's dates
    reported = re.findall(r"^created (\S+) (\S+) \(time\)$", first_out, re.MULTILINE)
    runs = DagRun.objects.filter(run_type=DagRunType.SCHEDULED)
    assert sorted(runs.values_list("dag_id", "run_id")) == sorted(reported)
    for dag_run in runs:
        assert dag_run.run_id == f"scheduled__{dag_run.logical_date.isoformat()}"
        assert dag_run.data_interval_start == dag_run.data_interval_end == dag_run.logical_date
        assert dag_run.run_after == dag_run.logical_date
    per_run = Counter(TaskInstance.objects.values_list("dag_run_id", flat=True))
    assert sorted(per_run[pk] for pk in runs.values_list("pk", flat=True)) == [1] * len(reported)
