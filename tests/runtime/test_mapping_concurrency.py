"""Issue 38: expanding mapped tasks under faults, on PostgreSQL — ``manage.py scheduler``
processes killed with SIGKILL at random moments while they expand 1,000-wide mapped tasks,
two of them expanding at once: every map index of every run exists exactly once, none is
left unexpanded, and the next pass finishes what a killed one left."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml
from django.db.models import Count

from assets_app.models import DagRun, TaskInstance
from assets_app.services.dags.declare import dags_declare
from assets_app.services.dags.manifest import manifest_parse
from assets_app.services.runs.advance import task_instances_advance
from assets_app.services.runs.dag_runs import dag_run_trigger
from tests.live_server import REPO, server_env

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

WIDTH = 1000
ROUNDS = 6
RUNS_PER_ROUND = 4
RUNS = ROUNDS * RUNS_PER_ROUND

MANIFEST = f"""
dags:
  - dag_id: wide_mapping_under_faults
    tags: [mapping, faults]
    max_active_runs: {RUNS}
    tasks:
      - {{task_id: list_files}}
      - task_id: process_file
        upstream: [list_files]
        mapped: {{length: {WIDTH}, group: null}}
      - {{task_id: merge, upstream: [process_file]}}
"""


def _scheduler(log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "manage.py", "scheduler", "--interval", "0.05", "--max-passes", "2000"],
        cwd=REPO,
        env=server_env(),
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )


def test_schedulers_killed_while_expanding_leave_each_map_index_once(tmp_path):
    dags_declare(manifest=manifest_parse(yaml.safe_load(MANIFEST)), fileloc="faults.yaml")
    rng = random.Random(38)
    runs: list[DagRun] = []
    partial_rounds = 0
    for round_ in range(ROUNDS):
        # new runs whose upstream is done without its hand-over: the schedulers' passes
        # expand their process_file, two schedulers at once, killed at a random moment
        runs += [
            dag_run_trigger(dag_id="wide_mapping_under_faults", run_id=f"r{round_}-{n}")
            for n in range(RUNS_PER_ROUND)
        ]
        TaskInstance.objects.filter(task_id="list_files").update(state="success")
        logs = [tmp_path / f"s{round_}-{i}.log" for i in range(2)]
        started = [_scheduler(log) for log in logs]
        deadline = time.monotonic() + 60
        while not all("scheduler started" in log.read_text(errors="replace") for log in logs):
            assert time.monotonic() < deadline, [log.read_text() for log in logs]
            time.sleep(0.02)
        time.sleep(rng.uniform(0.0, 1.2))  # into their first passes' expansions
        for process in started:
            process.send_signal(signal.SIGKILL)
            process.wait()
        unexpanded = TaskInstance.objects.filter(task_id="process_file", map_index=-1).count()
        partial_rounds += 0 < unexpanded < RUNS_PER_ROUND
        TaskInstance.objects.filter(task_id="list_files").update(state="success")
        task_instances_advance()  # the next pass finishes what the killed ones left

    print(f"rounds killed mid-expansion: {partial_rounds} of {ROUNDS}")
    per_run = Counter(
        dict(
            TaskInstance.objects.filter(task_id="process_file")
            .values_list("dag_run")
            .annotate(n=Count("pk"))
            .values_list("dag_run", "n")
        )
    )
    assert per_run == {run.pk: WIDTH for run in runs}
    for run in runs:
        indexes = sorted(
            TaskInstance.objects.filter(dag_run=run, task_id="process_file").values_list(
                "map_index", flat=True
            )
        )
        assert indexes == list(range(WIDTH)), run.run_id
    assert set(
        TaskInstance.objects.filter(task_id="process_file").values_list("state", flat=True)
    ) == {"scheduled"}
