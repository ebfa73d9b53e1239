"""Runs that follow their DAG, under concurrency (PostgreSQL, real server process):

- two upstreams of one task finishing at the same moment hand it over exactly once, without a
  scheduler pass (each decides after its own commit: the later one sees both);
- a ``max_active_runs: 1`` consumer receiving events while its run is long: runs follow one
  after another, every event consumed exactly once, none stranded (coalesced into the next
  run, or one run each with ``one_run_per_event``).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import yaml

from assets_app.models import DagRun, DagRunAssetEvent, TaskInstance
from assets_app.services.assets.events import asset_event_create_manual
from assets_app.services.dags.declare import dags_declare
from assets_app.services.dags.manifest import manifest_parse
from assets_app.services.runs.admit import dag_runs_admit
from assets_app.services.runs.advance import task_instances_advance
from assets_app.services.runs.dag_runs import dag_run_trigger
from assets_app.services.runs.settle import dag_run_settle
from assets_app.services.scheduling.scheduler import scheduler_pass
from tests.executionapi.test_concurrency import _patch_all

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
]

END = "2026-12-02T00:00:00Z"
SUCCESS = {"state": "success", "end_date": END, "task_outlets": [], "outlet_events": []}


def declare(text: str) -> None:
    dags_declare(manifest=manifest_parse(yaml.safe_load(text)), fileloc="flow.yaml")


def test_two_upstreams_finishing_at_once_hand_their_join_over_exactly_once(server):
    # given 15 runs of a fan-in, both upstreams of each join running
    declare(
        """
dags:
  - dag_id: fanin
    tasks:
      - {task_id: left}
      - {task_id: right}
      - {task_id: join, upstream: [left, right]}
"""
    )
    runs = [dag_run_trigger(dag_id="fanin", run_id=f"r{i}") for i in range(15)]
    TaskInstance.objects.filter(task_id__in=["left", "right"]).update(
        state="running", hostname="h", pid=1
    )
    requests = [
        (str(ti.pk), SUCCESS)
        for ti in TaskInstance.objects.filter(task_id__in=["left", "right"]).order_by("run_id")
    ]

    # when every upstream reports success at the same moment
    assert set(_patch_all(server, requests)) == {204}

    # then every join was handed over (no scheduler pass ran), and a pass finds nothing left
    joins = TaskInstance.objects.filter(task_id="join")
    assert set(joins.values_list("state", flat=True)) == {"scheduled"}
    assert joins.count() == 15
    assert task_instances_advance().scheduled == 0
    assert {run.state for run in DagRun.objects.filter(pk__in=[r.pk for r in runs])} == {"running"}


CONSUMER = """
dags:
  - dag_id: producer
    tasks: [{{task_id: p, outlets: [{{asset: {{name: landed}}}}]}}]
  - dag_id: consumer
    schedule: {{asset: {{name: landed}}}}
    max_active_runs: 1
    one_run_per_event: {per_event}
    tasks: [{{task_id: c}}]
"""


def _finish_run(run: DagRun) -> None:
    TaskInstance.objects.filter(dag_run=run).update(state="success")
    assert dag_run_settle(dag_run_id=run.pk)


@pytest.mark.parametrize("per_event", [False, True], ids=["coalesced", "one-run-per-event"])
def test_a_capped_consumer_gets_every_event_once_runs_one_after_another(per_event):
    declare(CONSUMER.format(per_event="true" if per_event else "false"))
    first_event = asset_event_create_manual(name="landed")
    (first,) = scheduler_pass().created
    assert DagRun.objects.get(pk=first.dag_run_pk).state == "running"

    # when five events arrive at once while the run is long, with schedulers passing
    stop = threading.Event()
    passes: list[int] = []

    def schedule() -> None:
        while not stop.is_set():
            passes.append(len(scheduler_pass().created))

    with ThreadPoolExecutor(max_workers=6) as pool:
        scheduler = pool.submit(schedule)
        barrier = threading.Barrier(5)

        def produce() -> int:
            barrier.wait()
            return asset_event_create_manual(name="landed").pk

        events = [pool.submit(produce) for _ in range(5)]
        event_ids = {future.result(timeout=60) for future in events}
        stop.set()
        scheduler.result(timeout=60)

    # then no run was created while the first one ran
    assert sum(passes) == 0
    assert DagRun.objects.filter(dag_id="consumer").count() == 1

    # and as each run ends, the next comes, one at a time, until every event is consumed
    consumer_runs = [DagRun.objects.get(pk=first.dag_run_pk)]
    for _ in range(10):
        _finish_run(consumer_runs[-1])
        created = scheduler_pass().created
        dag_runs_admit()
        if not created:
            break
        assert len(created) == 1
        assert DagRun.objects.filter(dag_id="consumer", state="running").count() == 1
        consumer_runs.append(DagRun.objects.get(pk=created[0].dag_run_pk))
    consumed = list(
        DagRunAssetEvent.objects.filter(dag_run__dag_id="consumer").values_list(
            "event_id", flat=True
        )
    )
    assert sorted(consumed) == sorted({first_event.pk, *event_ids})  # each once, all of them
    assert len(consumer_runs) == (6 if per_event else 2)
