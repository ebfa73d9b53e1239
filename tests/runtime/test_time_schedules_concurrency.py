"""Real ``manage.py scheduler`` processes over the same due time-scheduled DAGs (PostgreSQL).

Two schedulers racing for the same due DAGs create every due run exactly once between them;
a scheduler killed with ``kill -9`` in the middle of a pass leaves only whole batches behind
(every DAG with all its runs, every run with all its task instances, or nothing), and the
next scheduler creates the rest: no run lost, none twice.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.utils import timezone

from assets_app.models import Dag, DagRun, DagRunType, TaskInstance
from assets_app.services.dags.declare import dags_declare, dags_set_paused
from assets_app.services.dags.manifest import manifest_parse
from tests.live_server import REPO, server_env
from tests.runtime.test_scheduler_concurrency import (
    start_schedulers,
    stop_schedulers,
    wait_until_started,
)

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

DAYS = 6  # due moments per DAG: the last DAYS midnights (UTC), today's included
TASKS = [{"task_id": "extract"}, {"task_id": "load", "upstream": ["extract"]}]


def midnights() -> list[datetime]:
    today = timezone.now().astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return [today - timedelta(days=DAYS - 1 - n) for n in range(DAYS)]


def declare_due_dags(count: int, *, paused: bool) -> tuple[list[str], list[datetime]]:
    """``count`` daily DAGs catching up over the last ``DAYS`` midnights (the end date is
    today's, so a pass that crosses midnight has nothing more to do)."""
    moments = midnights()
    dag_ids = [f"timed_{n:04d}" for n in range(count)]
    manifest = {
        "dags": [
            {
                "dag_id": dag_id,
                "schedule": "@daily",
                "start_date": moments[0].isoformat(),
                "end_date": moments[-1].isoformat(),
                "catchup": True,
                "is_paused": paused,
                "tasks": TASKS,
            }
            for dag_id in dag_ids
        ]
    }
    dags_declare(manifest=manifest_parse(manifest), fileloc="timed.yaml")
    return dag_ids, moments


def scheduled_runs() -> list[tuple[str, str]]:
    return list(
        DagRun.objects.filter(run_type=DagRunType.SCHEDULED).values_list("dag_id", "run_id")
    )


def assert_every_due_run_exists_once(dag_ids: list[str], moments: list[datetime]) -> None:
    runs = scheduled_runs()
    assert [run for run, n in Counter(runs).items() if n > 1] == []  # none twice
    expected = {
        (dag_id, DagRun.generate_run_id(run_type=DagRunType.SCHEDULED, logical_date=at))
        for dag_id in dag_ids
        for at in moments
    }
    assert set(runs) == expected  # none lost, none extra
    logical = DagRun.objects.filter(run_type=DagRunType.SCHEDULED).values_list(
        "dag_id", "logical_date"
    )
    assert len(set(logical)) == len(expected)  # one run per moment
    assert_whole_runs()
    # every cursor went past the end date
    assert not Dag.objects.filter(dag_id__in=dag_ids, next_dagrun__isnull=False).exists()


def assert_whole_runs() -> None:
    """Every scheduled run has both its task instances."""
    per_run = Counter(
        TaskInstance.objects.filter(dag_run__run_type=DagRunType.SCHEDULED).values_list(
            "dag_run_id", flat=True
        )
    )
    runs = DagRun.objects.filter(run_type=DagRunType.SCHEDULED).values_list("pk", flat=True)
    assert {per_run[pk] for pk in runs} <= {len(TASKS)}


def test_two_schedulers_create_each_due_run_once(tmp_path: Path) -> None:
    # given 600 paused DAGs with 6 due moments each, and two schedulers running
    dag_ids, moments = declare_due_dags(600, paused=True)
    schedulers = start_schedulers(2, tmp_path)
    try:
        wait_until_started(schedulers)

        # when the DAGs are unpaused at once: both race for the same due DAGs
        dags_set_paused(dag_ids=dag_ids, is_paused=False)
        expected = len(dag_ids) * len(moments)
        deadline = time.monotonic() + 240
        while len(scheduled_runs()) < expected and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(1.0)  # a few more passes: nothing more may come
    finally:
        logs = stop_schedulers(schedulers)

    # then every due run exists once, whole
    assert all(process.returncode == 0 for process, _ in schedulers), logs
    assert_every_due_run_exists_once(dag_ids, moments)
    # and the two shared the work: their reports add up to the runs, none reported twice
    reported = [re.findall(r"^created (\S+) (\S+) \(time\)$", log, re.MULTILINE) for log in logs]
    assert sorted(run for lines in reported for run in lines) == sorted(scheduled_runs())
    assert all(lines for lines in reported), [len(lines) for lines in reported]
    assert all("scheduler pass failed" not in log for log in logs), logs
    print(f"\nruns per scheduler process: {[len(lines) for lines in reported]}")


def open_transactions_elsewhere() -> int:
    """Backends of this database other than ours that are in a transaction."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND xact_start IS NOT NULL"
        )
        (count,) = cursor.fetchone()
    return int(count)


def test_a_scheduler_killed_mid_pass_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    # given 1500 due DAGs (9000 runs: 15 batches), and a scheduler working on them
    dag_ids, moments = declare_due_dags(1500, paused=False)
    expected = len(dag_ids) * len(moments)
    log = tmp_path / "killed.log"
    with log.open("wb") as out:
        killed = subprocess.Popen(
            [sys.executable, "manage.py", "scheduler", "--once"],
            cwd=REPO,
            env=server_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        # when it is killed with -9 as soon as its first batch committed
        deadline = time.monotonic() + 120
        while not scheduled_runs():
            assert killed.poll() is None, log.read_text(errors="replace")
            assert time.monotonic() < deadline, "no run created"
            time.sleep(0.01)
        os.killpg(killed.pid, signal.SIGKILL)
    finally:
        killed.wait(timeout=30)
    assert killed.returncode == -signal.SIGKILL

    # then it left whole batches only: a DAG has all its runs or none, a run all its tasks
    at_kill = scheduled_runs()
    assert 0 < len(at_kill) < expected, "the scheduler was not killed mid-pass"
    per_dag = Counter(dag_id for dag_id, _ in at_kill)
    assert set(per_dag.values()) == {len(moments)}
    assert_whole_runs()
    done = set(per_dag)
    # and the DAGs it did not finish still wait at their first moment
    waiting = Dag.objects.filter(dag_id__in=dag_ids).exclude(dag_id__in=done)
    assert set(waiting.values_list("next_dagrun", flat=True)) == {moments[0]}

    # when the server has rolled the killed transaction back and another scheduler runs
    deadline = time.monotonic() + 30
    while open_transactions_elsewhere():
        assert time.monotonic() < deadline, "the killed scheduler's transaction stayed open"
        time.sleep(0.05)
    rerun = subprocess.run(
        [sys.executable, "manage.py", "scheduler", "--once"],
        cwd=REPO,
        env=server_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )

    # then every due run exists once: the rest created, none of the first ones again
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    created = re.findall(r"^created (\S+) (\S+) \(time\)$", rerun.stdout, re.MULTILINE)
    assert len(created) == expected - len(at_kill)
    assert not set(created) & set(at_kill)
    assert_every_due_run_exists_once(dag_ids, moments)
    print(f"\nkilled after {len(at_kill)} of {expected} runs; the next scheduler made the rest")
