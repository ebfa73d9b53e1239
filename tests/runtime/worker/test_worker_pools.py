"""Pools and task concurrency limits with real processes on PostgreSQL (the claim's pool lock
is what keeps two claims from over-filling a pool):

- two ``manage.py scheduler`` and two ``manage.py worker`` processes share many runs whose
  tasks take slots of a 2-slot pool: a watcher sampling the pool while they run never sees
  more than 2 slots taken, and every task instance succeeds;
- a real Airflow DAG file whose task runs in a 1-slot pool with ``max_active_tis_per_dag=1``,
  run by two workers: no two of its task instances' start/end dates overlap.
"""

from __future__ import annotations

import signal
import textwrap
import threading
import time
from pathlib import Path

import pytest
from django.db import connections
from django.db.models import Sum

from assets_app.models import DagRun, Pool, TaskInstance
from assets_app.services.dags.declare import dags_set_paused
from assets_app.services.runs.dag_runs import dag_run_trigger
from tests.executionapi.conftest import airflow_sdk  # noqa: F401 (a fixture)
from tests.runtime.test_scheduler_concurrency import (
    start_schedulers,
    stop_schedulers,
    wait_until_started,
)
from tests.runtime.worker.conftest import TASKS, dags_folder_load, declare, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

RUNS = 12


class SlotWatcher(threading.Thread):
    """Samples the slots a pool's queued and running task instances take, on a connection
    of its own, until stopped; ``peak`` is the most seen."""

    def __init__(self, pool: str) -> None:
        super().__init__(daemon=True)
        self.pool = pool
        self.peak = 0
        self.samples = 0
        self.stopped = threading.Event()

    def run(self) -> None:
        try:
            while not self.stopped.is_set():
                used = TaskInstance.objects.filter(
                    pool=self.pool, state__in=("queued", "running")
                ).aggregate(used=Sum("pool_slots"))["used"]
                self.peak = max(self.peak, used or 0)
                self.samples += 1
                time.sleep(0.01)
        finally:
            connections.close_all()


def overlaps(intervals: list[tuple[float, float]]) -> int:
    """The most intervals open at one instant."""
    edges = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    most = now = 0
    for _, step in edges:  # an end before a start at the same instant: -1 sorts first
        now += step
        most = max(most, now)
    return most


def test_two_schedulers_and_two_workers_never_over_fill_a_pool(start_worker, tmp_path):
    # given runs of a DAG whose two tasks take 1 and 2 slots of a 2-slot pool, and a third
    # task outside it; the schedulers admit the queued runs as earlier ones finish
    Pool.objects.create(pool="narrow", slots=2)
    hold = f"{TASKS}:hold_a_slot"
    declare(
        [
            {
                "dag_id": "pooled",
                "max_active_runs": 4,
                "tasks": [
                    {"task_id": "one", "callable": hold, "pool": "narrow"},
                    {"task_id": "two", "callable": hold, "pool": "narrow", "pool_slots": 2},
                    {"task_id": "free", "callable": hold},
                ],
            }
        ]
    )
    for n in range(RUNS):
        dag_run_trigger(dag_id="pooled", run_id=f"r{n}")
    watcher = SlotWatcher("narrow")
    watcher.start()

    # when two schedulers and two workers run until every run ends
    schedulers = start_schedulers(2, tmp_path)
    workers = [start_worker("--concurrency", "4") for _ in range(2)]
    try:
        wait_until_started(schedulers)
        wait_until(
            lambda: DagRun.objects.filter(dag_id="pooled", state="success").count() == RUNS,
            timeout=300,
            what="every run to succeed\n" + "\n".join(w.output()[-3000:] for w in workers),
        )
    finally:
        watcher.stopped.set()
        watcher.join(timeout=10)
        for worker in workers:
            worker.signal(signal.SIGTERM)
        for worker in workers:
            worker.wait()
        logs = stop_schedulers(schedulers)

    # then the pool never had more than its 2 slots taken, though each task ran
    assert watcher.samples > 50, watcher.samples
    assert watcher.peak == 2, (watcher.peak, logs)
    rows = TaskInstance.objects.filter(dag_id="pooled")
    assert set(rows.values_list("state", flat=True)) == {"success"}
    pooled = [
        (ti.start_date.timestamp(), ti.end_date.timestamp(), ti.pool_slots)
        for ti in rows.filter(pool="narrow")
    ]
    most = 0
    for start, _, _ in pooled:  # slots in use at each start, by the recorded dates
        most = max(most, sum(s for b, e, s in pooled if b <= start < e))
    assert most <= 2
    both = ["finished pooled" in w.output() for w in workers]
    assert all(both), "both workers ran task instances"


DAG_FILE = """
import time
from datetime import datetime

from airflow.sdk import DAG, task

with DAG(dag_id="one_at_a_time", schedule=None, start_date=datetime(2026, 1, 1),
         max_active_runs=10):

    @task(pool="single", max_active_tis_per_dag=1, priority_weight=3)
    def exclusive():
        time.sleep(0.5)

    exclusive()
"""


def test_a_dag_files_single_slot_task_never_overlaps_under_two_workers(
    airflow_sdk,  # noqa: F811
    start_worker,
    settings,
    tmp_path: Path,
):
    # given a real DAG file, its task in a 1-slot pool with max_active_tis_per_dag=1
    folder = tmp_path / "dags"
    folder.mkdir()
    (folder / "one_at_a_time.py").write_text(textwrap.dedent(DAG_FILE))
    out = dags_folder_load(folder, settings=settings, parser_home=tmp_path / "parser_home")
    dags_set_paused(dag_ids=["one_at_a_time"], is_paused=False)
    from assets_app.models import DagTask

    task = DagTask.objects.get(dag_id="one_at_a_time")
    assert (task.pool, task.max_active_tis_per_dag, task.priority_weight) == ("single", 1, 3), out
    Pool.objects.create(pool="single", slots=1)

    # when four runs are triggered and two workers run them
    for n in range(4):
        dag_run_trigger(dag_id="one_at_a_time", run_id=f"r{n}")
    env = {
        "AIRFLOW_HOME": str(tmp_path / "airflow_home"),
        "AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": "1",
    }
    workers = [start_worker("--concurrency", "2", env=env) for _ in range(2)]
    try:
        wait_until(
            lambda: (
                TaskInstance.objects.filter(dag_id="one_at_a_time", state="success").count() == 4
            ),
            timeout=300,
            what="the four task instances\n" + "\n".join(w.output()[-5000:] for w in workers),
        )
    finally:
        for worker in workers:
            worker.signal(signal.SIGTERM)
        for worker in workers:
            worker.wait()

    # then their start and end dates never overlap
    rows = TaskInstance.objects.filter(dag_id="one_at_a_time")
    intervals = [(ti.start_date.timestamp(), ti.end_date.timestamp()) for ti in rows]
    assert all(ti.priority_weight == 3 for ti in rows)
    assert overlaps(intervals) == 1, sorted(intervals)
