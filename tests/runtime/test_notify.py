"""Wake on commit (PostgreSQL): NOTIFY from producers and schedulers, LISTEN in the scheduler.

A notification is a hint: one that is lost (the listener reconnecting) costs at most one
interval, never an event.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection, transaction

from assets_app.models import Dag, DagRun, DagRunAssetEvent, TaskInstance, TaskInstanceState
from assets_app.notify import QUEUE_CHANNEL, RUNS_CHANNEL, Listener, notify
from assets_app.services.scheduling.scheduler import scheduler_pass
from devtools.processes import process_stop
from runtime.daemon import wait_for_work
from tests.live_server import REPO, server_env
from tests.runtime.test_scheduler_concurrency import MANIFEST, producer_task_instances, succeed

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def declare(tmp_path: Path) -> None:
    path = tmp_path / "dags.json"
    path.write_text(json.dumps(MANIFEST))
    call_command("declare_dags", str(path), stdout=StringIO())


def terminate_listeners() -> int:
    """End the server processes of this database's LISTEN connections (as a restart would)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND query LIKE 'LISTEN %%' "
            "AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0]


def test_a_notification_is_delivered_at_commit_and_not_on_rollback():
    with Listener("test_channel") as listener:
        assert listener.listen()
        with transaction.atomic():
            notify("test_channel")
            assert not listener.wait(0.3)  # not before the commit
        assert listener.wait(5)
        with transaction.atomic():
            notify("test_channel")
            transaction.set_rollback(True)
        assert not listener.wait(0.3)


def test_a_burst_of_notifications_is_one_wake_up():
    with Listener("test_channel") as listener:
        assert listener.listen()
        for _ in range(20):
            with transaction.atomic():
                notify("test_channel")
        time.sleep(0.2)  # all delivered
        assert listener.wait(5)
        assert not listener.wait(0.3)


def test_registration_wakes_the_schedulers_and_a_scheduler_the_workers(tmp_path):
    # given: consumers declared, a producer running, both channels listened to
    declare(tmp_path)
    (ti,) = producer_task_instances(1, tasks=("produce_a",))
    with Listener(QUEUE_CHANNEL) as schedulers, Listener(RUNS_CHANNEL) as workers:
        assert schedulers.listen()
        assert workers.listen()

        # when / then: the success commits → the schedulers' channel
        succeed(ti.pk)
        assert schedulers.wait(5)
        assert not workers.wait(0.2)

        # when / then: a pass creates runs → the workers' channel
        assert scheduler_pass().created
        assert workers.wait(5)


def test_a_success_that_queues_nothing_wakes_nobody(tmp_path):
    # given: every consumer of A paused
    declare(tmp_path)
    Dag.objects.filter(dag_id__in=["on_a", "any_ab", "all_ab"]).update(is_paused=True)
    (ti,) = producer_task_instances(1, tasks=("produce_a",))
    with Listener(QUEUE_CHANNEL) as schedulers:
        assert schedulers.listen()

        # when
        succeed(ti.pk)

        # then: no queue row, no wake-up
        assert not schedulers.wait(0.5)


def test_a_reconnecting_listener_reports_a_possible_loss():
    # given: a listener whose connection the server ended
    with Listener("test_channel", reconnect_delay=0.2) as listener:
        assert listener.listen()
        first_pid = listener.backend_pid()
        assert terminate_listeners() == 1
        # a notification sent now reaches nobody
        with transaction.atomic():
            notify("test_channel")

        # when: waiting, it notices the broken connection, then listens again
        woken = [listener.wait(1.0) for _ in range(3)]

        # then: it said "maybe something happened" once reconnected, on a new connection
        assert woken[0] is False
        assert True in woken[1:]
        assert listener.backend_pid() not in (None, first_pid)


def wait_for(predicate, *, timeout: float, what: str) -> float:
    started = time.monotonic()
    while not predicate():
        assert time.monotonic() - started < timeout, f"{what}: not within {timeout} s"
        time.sleep(0.05)
    return time.monotonic() - started


@pytest.mark.slow
def test_the_scheduler_wakes_on_commit_and_a_lost_notification_loses_no_event(tmp_path):
    """With a 60 s interval the runs can only come that fast from notifications (or, after
    the listener lost its connection, from the pass that follows reconnecting)."""
    # given: a scheduler polling only every 60 s, past its first pass
    declare(tmp_path)
    first, second, third = producer_task_instances(3, tasks=("produce_a",))
    log = tmp_path / "scheduler.log"
    process = subprocess.Popen(
        [sys.executable, "manage.py", "scheduler", "--interval", "60"],
        cwd=REPO,
        env=server_env(),
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for(lambda: "scheduler started" in log.read_text(), timeout=60, what="start")
        wait_for(listening, timeout=30, what="LISTEN")
        time.sleep(0.5)  # its first pass is over

        def runs_of_on_a() -> int:
            return DagRun.objects.filter(dag_id="on_a").count()

        # when / then: a success → a run, long before the interval
        succeed(first.pk)
        wait_for(lambda: runs_of_on_a() == 1, timeout=30, what="run after a notification")

        # when: its listening connection is ended, and a success commits meanwhile
        assert terminate_listeners() == 1
        succeed(second.pk)

        # then: the event is consumed all the same, long before the interval
        wait_for(lambda: runs_of_on_a() == 2, timeout=30, what="run after a lost notification")
        wait_for(listening, timeout=30, what="LISTEN again")
        succeed(third.pk)
        wait_for(lambda: runs_of_on_a() == 3, timeout=30, what="run after reconnecting")
    finally:
        process_stop(process, grace=30)
    assert process.returncode == 0, log.read_text()

    # each event consumed exactly once by on_a
    consumed = list(
        DagRunAssetEvent.objects.filter(dag_run__dag_id="on_a").values_list("event_id", flat=True)
    )
    assert len(consumed) == len(set(consumed)) == 3
    assert (
        TaskInstance.objects.filter(dag_id="on_a", state=TaskInstanceState.SCHEDULED).count() == 3
    )


def listening() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND query LIKE 'LISTEN %%' AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0] == 1


def test_a_waiting_worker_wakes_when_a_scheduler_creates_runs(tmp_path):
    # given: an event queued for consumers, a worker waiting for work (a 60 s poll)
    declare(tmp_path)
    (ti,) = producer_task_instances(1, tasks=("produce_a",))
    succeed(ti.pk)
    woke = threading.Event()
    with Listener(RUNS_CHANNEL) as listener:
        assert listener.listen()

        def worker() -> None:
            wait_for_work(60, interrupted=lambda: False, listener=listener)
            woke.set()

        thread = threading.Thread(target=worker)
        thread.start()
        try:
            assert not woke.wait(0.5)  # nothing to do yet

            # when: a scheduler pass creates runs (and commits)
            assert scheduler_pass().created

            # then: the worker stops waiting, long before its poll interval
            assert woke.wait(30)
        finally:
            thread.join(timeout=90)
