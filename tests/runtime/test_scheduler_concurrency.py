"""Several scheduler processes against PostgreSQL while producers register events.

Every event must be consumed exactly once by each consumer DAG, and no run may be created
for a set of events another run already consumed.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from io import StringIO
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.core.management import call_command
from django.db import connection, transaction
from django.utils import timezone

from assets_app.models import (
    AssetAliasAssetEvent,
    AssetDagRunQueue,
    AssetEvent,
    Dag,
    DagRun,
    DagRunAssetEvent,
    TaskInstance,
    TaskInstanceState,
)
from assets_app.outlets import AliasOutletEvent, OutletProfile, OutletType
from assets_app.services.assets.registration import asset_changes_register
from assets_app.services.scheduling.queue_watch import QueueWatch
from assets_app.services.scheduling.scheduler import (
    Outcome,
    dag_asset_triggered_run_create,
    dags_asset_triggered_runs_create,
    scheduler_pass,
)
from assets_app.tokens import token_issue
from devtools.processes import process_stop
from task_sdk.definitions import AssetUniqueKey
from tests.factories import DagRunFactory
from tests.live_server import REPO, server_env

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

A, B, X = "s3://conc/a", "s3://conc/b", "s3://conc/x"
ALIAS = "conc-alias"
PRODUCER = "conc_producer"
SINGLE_CONDITION_DAGS = ("on_a", "any_ab", "on_alias", "on_ref_b")
MANIFEST = {
    "dags": [
        {
            "dag_id": PRODUCER,
            "tasks": [
                {"task_id": "produce_a", "outlets": [{"asset": {"uri": A}}]},
                {"task_id": "produce_b", "outlets": [{"asset": {"uri": B}}]},
                {
                    "task_id": "produce_ab",
                    "outlets": [{"asset": {"uri": A}}, {"asset": {"uri": B}}],
                },
                {"task_id": "produce_alias", "outlets": [{"alias": ALIAS}]},
            ],
        },
        {"dag_id": "on_a", "schedule": {"asset": {"uri": A}}, "tasks": [{"task_id": "t"}]},
        {
            "dag_id": "any_ab",
            "schedule": {"any": [{"asset": {"uri": A}}, {"asset": {"uri": B}}]},
            "tasks": [{"task_id": "t"}],
        },
        {
            "dag_id": "all_ab",
            "schedule": {"all": [{"asset": {"uri": A}}, {"asset": {"uri": B}}]},
            "tasks": [{"task_id": "t"}],
        },
        {"dag_id": "on_alias", "schedule": {"alias": ALIAS}, "tasks": [{"task_id": "t"}]},
        {"dag_id": "on_ref_b", "schedule": {"asset_ref": {"uri": B}}, "tasks": [{"task_id": "t"}]},
    ]
}

# what each producer task sends (task_outlets, outlet_events)
OUTLETS = {
    "produce_a": ([OutletProfile(type=OutletType.ASSET, name=A, uri=A)], []),
    "produce_b": ([OutletProfile(type=OutletType.ASSET, name=B, uri=B)], []),
    "produce_ab": (
        [
            OutletProfile(type=OutletType.ASSET, name=A, uri=A),
            OutletProfile(type=OutletType.ASSET, name=B, uri=B),
        ],
        [],
    ),
    "produce_alias": (
        [OutletProfile(type=OutletType.ALIAS, name=ALIAS)],
        [AliasOutletEvent(source_alias_name=ALIAS, dest_asset_key=AssetUniqueKey(name=X, uri=X))],
    ),
}
STREAM_TASKS = ("produce_a", "produce_b", "produce_alias")


#: No worker ends the consumers' runs here: they are uncapped, so that every event makes or
#: joins a run (with Airflow's default of 16 active runs they would stop after 16).
UNCAPPED = 100_000


def uncapped(dags: list[dict]) -> list[dict]:
    return [{**dag, "max_active_runs": UNCAPPED} if "schedule" in dag else dag for dag in dags]


def declare(tmp_path: Path) -> None:
    path = tmp_path / "dags.json"
    path.write_text(json.dumps({"dags": uncapped(MANIFEST["dags"])}))
    call_command("declare_dags", str(path), stdout=StringIO())


def producer_task_instances(count: int, *, tasks: tuple[str, ...]) -> list[TaskInstance]:
    run = DagRunFactory(dag=Dag.objects.get(dag_id=PRODUCER))
    return TaskInstance.objects.bulk_create(
        TaskInstance(
            dag_run=run,
            dag_id=PRODUCER,
            run_id=run.run_id,
            task_id=tasks[i % len(tasks)],
            map_index=i,
            state=TaskInstanceState.RUNNING,
        )
        for i in range(count)
    )


def succeed(ti_id: object) -> None:
    """What the execution API does on success: lock the TI, register, store the state."""
    with transaction.atomic():
        ti = TaskInstance.objects.select_for_update().get(pk=ti_id)
        outlets, events = OUTLETS[ti.task_id]
        asset_changes_register(task_instance=ti, task_outlets=outlets, outlet_events=events)
        ti.state = TaskInstanceState.SUCCESS
        ti.save(update_fields=["state", "updated_at"])


def produce(
    ti_ids: list[object], produce_one: Callable[[object], None], errors: list[BaseException]
) -> None:
    try:
        pace = random.Random(len(ti_ids))
        for ti_id in ti_ids:
            produce_one(ti_id)
            time.sleep(pace.uniform(0, 0.03))  # spread the arrivals over the schedulers' passes
    except BaseException as exc:  # reported by the test
        errors.append(exc)
    finally:
        connection.close()


def in_threads(
    work: Callable[[int], None], count: int, errors: list[BaseException]
) -> list[threading.Thread]:
    """Start ``work(i)`` for i in ``range(count)``, each in a thread of its own that reports
    an exception in ``errors`` and closes its connection."""

    def run(i: int) -> None:
        try:
            work(i)
        except BaseException as exc:  # reported by the test
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    return threads


def start_schedulers(count: int, tmp_path: Path) -> list[tuple[subprocess.Popen, Path]]:
    started = []
    for i in range(count):
        log = tmp_path / f"scheduler-{i}.log"
        process = subprocess.Popen(
            [
                sys.executable,
                "manage.py",
                "scheduler",
                "--interval",
                "0.05",
                "--max-passes",
                "5000",  # a bound in case the test dies before stopping it
            ],
            cwd=REPO,
            env=server_env(),
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
        )
        started.append((process, log))
    return started


def wait_until_started(started: list[tuple[subprocess.Popen, Path]]) -> None:
    deadline = time.monotonic() + 60
    for process, log in started:
        while "scheduler started" not in log.read_text(errors="replace"):
            assert process.poll() is None, log.read_text(errors="replace")
            assert time.monotonic() < deadline, "scheduler did not start"
            time.sleep(0.05)


def stop_schedulers(started: list[tuple[subprocess.Popen, Path]]) -> list[str]:
    for process, _ in started:
        process_stop(process, grace=30)  # one SIGTERM: a second one would kill it mid-exit
    return [log.read_text(errors="replace") for _, log in started]


def drain() -> None:
    for _ in range(5):
        if not scheduler_pass().created:
            return


def consumed_pairs() -> list[tuple[str, int]]:
    return list(DagRunAssetEvent.objects.values_list("dag_run__dag_id", "event_id"))


def expected_events(dag_id: str) -> set[int]:
    on = {
        "on_a": [A],
        "any_ab": [A, B],
        "all_ab": [A, B],
        "on_ref_b": [B],
    }
    if dag_id == "on_alias":
        return set(
            AssetAliasAssetEvent.objects.filter(alias__name=ALIAS).values_list(
                "event_id", flat=True
            )
        )
    return set(AssetEvent.objects.filter(asset__uri__in=on[dag_id]).values_list("pk", flat=True))


def assert_each_event_consumed_once(dag_ids: tuple[str, ...]) -> None:
    pairs = consumed_pairs()
    assert [pair for pair, n in Counter(pairs).items() if n > 1] == []  # none consumed twice
    for dag_id in dag_ids:
        got = {event_id for d, event_id in pairs if d == dag_id}
        assert got == expected_events(dag_id), dag_id  # none lost


def run_with_schedulers(
    tmp_path: Path, *, ti_ids: list[object], produce_one: Callable[[object], None], threads: int
) -> None:
    """Start 4 scheduler processes, produce from ``threads`` threads, stop, check everything."""
    schedulers = start_schedulers(4, tmp_path)
    try:
        wait_until_started(schedulers)
        started = time.monotonic()
        errors: list[BaseException] = []
        workers = [
            threading.Thread(target=produce, args=(ti_ids[i::threads], produce_one, errors))
            for i in range(threads)
        ]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=180)
        produced_in = time.monotonic() - started
        runs_while_producing = DagRun.objects.filter(run_type="asset_triggered").count()
        time.sleep(1.0)  # let the schedulers catch up with the last events
    finally:
        logs = stop_schedulers(schedulers)
    assert not any(worker.is_alive() for worker in workers)
    assert errors == []

    # the schedulers stopped cleanly on SIGTERM and shared the work, while events arrived
    assert all(process.returncode == 0 for process, _ in schedulers), logs
    assert all("scheduler stopped after" in log for log in logs), logs
    by_scheduler = [len(re.findall(r"^created ", log, flags=re.MULTILINE)) for log in logs]
    assert sum(by_scheduler) > 0
    assert sum(1 for runs in by_scheduler if runs) >= 2, by_scheduler
    assert runs_while_producing > 0
    print(
        f"\n{len(ti_ids)} successes in {produced_in:.1f}s; "
        f"runs per scheduler process: {by_scheduler}"
    )

    # after a final pass every single-condition consumer consumed every event exactly once
    drain()
    assert_each_event_consumed_once(SINGLE_CONDITION_DAGS)
    # all-of: what it consumed so far was consumed once; one event on both assets completes it
    (last,) = producer_task_instances(1, tasks=("produce_ab",))
    succeed(last.pk)
    drain()
    assert_each_event_consumed_once((*SINGLE_CONDITION_DAGS, "all_ab"))

    # no run without events, nothing left waiting
    assert not DagRun.objects.filter(event_links__isnull=True, run_type="asset_triggered").exists()
    assert not AssetDagRunQueue.objects.exists()
    assert AssetEvent.objects.count() == len(ti_ids) + 2  # + the final produce_ab's two


@pytest.mark.slow
def test_four_scheduler_processes_consume_every_event_exactly_once(tmp_path):
    # given: consumers declared
    declare(tmp_path)
    tis = producer_task_instances(240, tasks=STREAM_TASKS)

    # when / then: 6 threads register 240 successes (as the API does) while 4 schedulers run
    run_with_schedulers(tmp_path, ti_ids=[ti.pk for ti in tis], produce_one=succeed, threads=6)


def success_body(task_id: str) -> dict[str, Any]:
    """The PATCH …/state body the task SDK sends for a producer task."""
    end_date = timezone.now().isoformat()
    if task_id == "produce_alias":
        return {
            "state": "success",
            "end_date": end_date,
            "task_outlets": [{"name": ALIAS, "type": "AssetAlias"}],
            "outlet_events": [
                {"source_alias_name": ALIAS, "dest_asset_key": {"name": X, "uri": X}, "extra": {}}
            ],
        }
    uri = A if task_id == "produce_a" else B
    return {
        "state": "success",
        "end_date": end_date,
        "task_outlets": [{"name": uri, "uri": uri, "type": "Asset"}],
        "outlet_events": [{"dest_asset_key": {"name": uri, "uri": uri}, "extra": {"n": 1}}],
    }


@pytest.mark.slow
def test_four_schedulers_while_200_successes_arrive_through_the_api(server, tmp_path):
    # given: consumers declared, 200 running producer task instances
    declare(tmp_path)
    tis = producer_task_instances(200, tasks=STREAM_TASKS)
    for ti in tis:
        ti.start_date = timezone.now()
    TaskInstance.objects.bulk_update(tis, ["start_date"])
    task_of = {ti.pk: ti.task_id for ti in tis}
    local = threading.local()

    def patch_success(ti_id: object) -> None:
        if not hasattr(local, "client"):
            local.client = httpx.Client(base_url=server.url, timeout=60)
        response = local.client.patch(
            f"/execution/task-instances/{ti_id}/state",
            json=success_body(task_of[ti_id]),
            headers={"Authorization": f"Bearer {token_issue(task_instance_id=str(ti_id))}"},
        )
        assert response.status_code == 204, response.text

    # when / then: 8 client threads send the successes while 4 schedulers run
    run_with_schedulers(
        tmp_path, ti_ids=[ti.pk for ti in tis], produce_one=patch_success, threads=8
    )
    assert set(TaskInstance.objects.filter(pk__in=task_of).values_list("state", flat=True)) == {
        "success"
    }


def test_schedulers_creating_runs_in_batches_consume_every_event_exactly_once(tmp_path):
    """Three schedulers, each creating runs for up to 7 DAGs per transaction, over 60
    consumer DAGs while four threads register 150 successes: every event is consumed once by
    every DAG, and no run is created from a queue row whose events another run took."""
    # given: the consumers of MANIFEST and 60 more on A, on B, or on A or B
    many = [
        {
            "dag_id": f"many_{i:02d}",
            "schedule": [
                {"asset": {"uri": A}},
                {"asset": {"uri": B}},
                {"any": [{"asset": {"uri": A}}, {"asset": {"uri": B}}]},
            ][i % 3],
            "tasks": [{"task_id": "t"}],
        }
        for i in range(60)
    ]
    path = tmp_path / "dags.json"
    path.write_text(json.dumps({"dags": uncapped(MANIFEST["dags"] + many)}))
    call_command("declare_dags", str(path), stdout=StringIO())
    tis = producer_task_instances(150, tasks=STREAM_TASKS)
    producing = threading.Event()
    producing.set()
    errors: list[BaseException] = []
    created: list[list[str]] = [[] for _ in range(3)]

    def schedule(i: int) -> None:
        watch = QueueWatch()
        while producing.is_set():
            result = scheduler_pass(watch=watch, batch_size=7)
            assert result.count(Outcome.FAILED) == 0
            created[i] += [run.dag_id for run in result.created]
            time.sleep(0.01)

    # when
    schedulers = in_threads(schedule, 3, errors)
    producers = [
        threading.Thread(target=produce, args=([ti.pk for ti in tis[i::4]], succeed, errors))
        for i in range(4)
    ]
    for thread in producers:
        thread.start()
    for thread in producers:
        thread.join(timeout=180)
    time.sleep(0.5)
    producing.clear()
    for thread in schedulers:
        thread.join(timeout=60)

    # then: the schedulers shared the work, and after a final pass every event was consumed
    # exactly once by each single-condition DAG
    assert errors == []
    assert sum(1 for runs in created if runs) >= 2, [len(runs) for runs in created]
    drain()
    assert_each_event_consumed_once(SINGLE_CONDITION_DAGS)
    pairs = consumed_pairs()
    assert [pair for pair, n in Counter(pairs).items() if n > 1] == []
    on = {0: [A], 1: [B], 2: [A, B]}
    for i in range(60):
        got = {event_id for d, event_id in pairs if d == f"many_{i:02d}"}
        expected = set(
            AssetEvent.objects.filter(asset__uri__in=on[i % 3]).values_list("pk", flat=True)
        )
        assert got == expected, i
    assert not DagRun.objects.filter(event_links__isnull=True, run_type="asset_triggered").exists()
    assert not AssetDagRunQueue.objects.exclude(target_dag_id="all_ab").exists()


def hold_dag_rows(dag_ids: list[str]) -> tuple[threading.Thread, threading.Event]:
    """Another connection holding these DAG rows, as a concurrent scheduler would; set the
    returned event to let go."""
    locked, release = threading.Event(), threading.Event()

    def hold(_: int) -> None:
        with transaction.atomic():
            list(Dag.objects.select_for_update(no_key=True).filter(dag_id__in=dag_ids))
            locked.set()
            release.wait(timeout=30)

    errors: list[BaseException] = []
    (holder,) = in_threads(hold, 1, errors)
    assert locked.wait(timeout=10), errors
    return holder, release


def many_ready_consumers(tmp_path: Path, count: int) -> list[str]:
    """``count`` consumer DAGs on A (besides MANIFEST's), one event on A: all ready."""
    many = [
        {"dag_id": f"many_{i:02d}", "schedule": {"asset": {"uri": A}}, "tasks": [{"task_id": "t"}]}
        for i in range(count)
    ]
    path = tmp_path / "dags.json"
    path.write_text(json.dumps({"dags": MANIFEST["dags"] + many}))
    call_command("declare_dags", str(path), stdout=StringIO())
    (ti,) = producer_task_instances(1, tasks=("produce_a",))
    succeed(ti.pk)
    return [dag["dag_id"] for dag in many]


def test_a_dag_locked_by_another_scheduler_is_skipped(tmp_path):
    # given: another connection holds the DAG row, as a concurrent scheduler would
    declare(tmp_path)
    (ti,) = producer_task_instances(1, tasks=("produce_a",))
    succeed(ti.pk)
    holder, release = hold_dag_rows(["on_a"])

    # when
    try:
        while_locked = dag_asset_triggered_run_create(dag_id="on_a")
    finally:
        release.set()
        holder.join(timeout=30)
    after = dag_asset_triggered_run_create(dag_id="on_a")

    # then: skipped without waiting, done once the lock is gone
    assert while_locked.outcome is Outcome.LOCKED
    assert after.outcome is Outcome.CREATED


def test_a_claim_passes_over_the_dags_another_transaction_holds(tmp_path):
    # given: five ready DAGs, the first two held by another scheduler
    dag_ids = many_ready_consumers(tmp_path, 5)
    holder, release = hold_dag_rows(dag_ids[:2])

    # when
    try:
        claimed = dags_asset_triggered_runs_create(dag_ids=dag_ids, limit=2)
    finally:
        release.set()
        holder.join(timeout=30)

    # then: the next two, without waiting
    assert [(o.dag_id, o.outcome) for o in claimed] == [
        (dag_ids[2], Outcome.CREATED),
        (dag_ids[3], Outcome.CREATED),
    ]


def test_a_pass_looks_again_at_a_dag_it_passed_over(tmp_path):
    # given: six ready DAGs, one held by another transaction during a first pass
    dag_ids = many_ready_consumers(tmp_path, 6)
    watch = QueueWatch()
    holder, release = hold_dag_rows([dag_ids[1]])
    try:
        first = scheduler_pass(watch=watch, batch_size=2)
    finally:
        release.set()
        holder.join(timeout=30)

    # when: no new queue row arrives
    second = scheduler_pass(watch=watch, batch_size=2)

    # then: the first pass served the others and passed it over; the next pass served it
    assert dag_ids[1] not in {run.dag_id for run in first.created}
    assert set(dag_ids) - {run.dag_id for run in first.created} == {dag_ids[1]}
    assert [run.dag_id for run in second.created] == [dag_ids[1]]


def test_concurrent_claims_are_disjoint_and_serve_every_dag_once(tmp_path):
    """Four threads claim from the same ready list at the same moment, batch after batch, as
    schedulers whose passes found the same DAGs ready: each DAG is served by exactly one."""
    # given: 60 ready DAGs
    dag_ids = many_ready_consumers(tmp_path, 60)
    start = threading.Barrier(4)
    served: list[list[str]] = [[] for _ in range(4)]
    errors: list[BaseException] = []

    def claim(i: int) -> None:
        start.wait(timeout=30)
        while outcomes := dags_asset_triggered_runs_create(dag_ids=dag_ids, limit=5):
            served[i] += [o.dag_id for o in outcomes if o.outcome is Outcome.CREATED]

    # when
    threads = in_threads(claim, 4, errors)
    for thread in threads:
        thread.join(timeout=120)

    # then: every DAG served once, by one of them, with one run
    assert errors == []
    everything = [dag_id for per_thread in served for dag_id in per_thread]
    assert sorted(everything) == sorted(dag_ids)
    assert sum(1 for per_thread in served if per_thread) >= 2, [len(x) for x in served]
    runs = Counter(DagRun.objects.filter(dag_id__in=dag_ids).values_list("dag_id", flat=True))
    assert set(runs.values()) == {1}
    assert not AssetDagRunQueue.objects.filter(target_dag_id__in=dag_ids).exists()


def test_a_producer_waits_for_the_scheduler_holding_its_queue_row(tmp_path, await_lock_wait):
    """The mechanism the schedulers rely on (no table lock): a producer's queue upsert waits
    for a scheduler that locked the row; once the scheduler deleted it and committed, the
    upsert inserts a fresh row, so the producer's event is consumed by the next pass."""
    # given: an event on A already queued for on_a
    declare(tmp_path)
    first, second = producer_task_instances(2, tasks=("produce_a",))
    succeed(first.pk)
    (row,) = AssetDagRunQueue.objects.filter(target_dag_id="on_a")
    locked, release = threading.Event(), threading.Event()

    def scheduler_holding_the_row() -> None:
        # what dag_asset_triggered_run_create does between locking and deleting the rows
        try:
            with transaction.atomic():
                AssetDagRunQueue.objects.select_for_update(skip_locked=True).get(pk=row.pk)
                locked.set()
                release.wait(timeout=30)
                AssetDagRunQueue.objects.filter(pk=row.pk).delete()
        finally:
            connection.close()

    scheduler = threading.Thread(target=scheduler_holding_the_row)
    scheduler.start()
    assert locked.wait(timeout=10)
    producer_done = threading.Event()

    def producer() -> None:
        try:
            succeed(second.pk)
        finally:
            producer_done.set()
            connection.close()

    producer_thread = threading.Thread(target=producer)
    producer_thread.start()

    # when: the producer's upsert meets the locked row, it waits (it does not skip it) ...
    # (on PostgreSQL the upsert is a step of the statement that inserts the events, whose
    # text pg_stat_activity cuts at 1 kB)
    try:
        assert await_lock_wait(query_like="WITH r AS (%INSERT INTO asset_event %") == 1
        assert not producer_done.wait(timeout=1.0)
    finally:
        release.set()
        scheduler.join(timeout=30)
    # ... until the scheduler deleted the row and committed
    assert producer_done.wait(timeout=30)
    producer_thread.join(timeout=30)

    # then: a fresh queue row waits for the second event, and a pass consumes it
    (fresh,) = AssetDagRunQueue.objects.filter(target_dag_id="on_a")
    assert fresh.pk != row.pk
    second_event = AssetEvent.objects.get(source_map_index=second.map_index)
    outcome = dag_asset_triggered_run_create(dag_id="on_a")
    assert outcome.outcome is Outcome.CREATED
    assert second_event.pk in outcome.runs[0].event_ids
