"""Two ``manage.py worker`` processes share 50 runnable task instances (PostgreSQL: the claim's
``FOR UPDATE SKIP LOCKED`` is what keeps them apart): each runs exactly once, and every run
ends ``success``."""

from __future__ import annotations

import re
import signal

import pytest

from tests.runtime.worker.conftest import (
    TASKS,
    declare,
    run_states,
    scheduled_task_instances,
    states,
    wait_until,
)

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

COUNT = 50


def test_two_workers_run_each_of_50_task_instances_exactly_once(start_worker, marker_dir):
    # given 50 runnable task instances, each in its own run
    declare([{"dag_id": "d", "tasks": [{"task_id": "t", "callable": f"{TASKS}:record_once"}]}])
    tis = scheduled_task_instances("d", "t", COUNT)

    # when two workers run side by side until everything is done
    workers = [start_worker("--concurrency", "4") for _ in range(2)]
    wait_until(
        lambda: all(state == "success" for state in states(tis)),
        timeout=240,
        what="all 50 task instances to succeed",
    )
    for worker in workers:
        worker.signal(signal.SIGTERM)
    assert [worker.wait() for worker in workers] == [0, 0], [w.output() for w in workers]

    # then each task instance ran exactly once (its marker file is created with "x"), as its
    # first try, and the two workers' reports add up to 50 with no task run by both
    outputs = [worker.output() for worker in workers]
    assert sorted(p.name for p in marker_dir.iterdir()) == sorted(str(t.pk) for t in tis)
    for ti in tis:
        assert (marker_dir / str(ti.pk)).read_text() == f"{ti.run_id} try 1"
    finished = [set(re.findall(r"finished d\.t @ (\S+) try 1: success", out)) for out in outputs]
    assert len(finished[0]) + len(finished[1]) == COUNT, outputs
    assert not finished[0] & finished[1]
    assert all(finished), "both workers ran task instances"
    assert states(tis) == ["success"] * COUNT
    assert run_states(tis) == ["success"] * COUNT
