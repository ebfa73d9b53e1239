"""A month of the seed scenario's history, for looking at the admin (screenshots, browser tests).

``showcase_seed()`` declares the example DAGs (``examples/dags.yaml``) and writes what a month
of their runs would have left: producer runs whose tasks emitted events (hourly over the last
two days, a few a day before), the consumer runs those events triggered, a failed and a running
task instance, the consumers still queued on the newest events, and three runs of a DAG with
a task graph (``showcase_dags.yaml``: a 60-character id, five tasks, an alias and an
``Asset.ref`` outlet; one succeeded, one failed, one running). Deterministic: the same
rows on every call on an empty database, times relative to now.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import transaction
from django.utils import timezone

from assets_app.models import (
    Asset,
    AssetAlias,
    AssetAliasAsset,
    AssetAliasAssetEvent,
    AssetDagRunQueue,
    AssetEvent,
    DagRun,
    DagRunAssetEvent,
    DagRunState,
    DagRunType,
    TaskInstance,
    TaskInstanceState,
)
from assets_app.services.audit import Actor
from assets_app.services.dags.declare import dags_set_paused
from assets_app.services.runs.marking import dag_run_mark
from devtools.processes import REPO

MANIFEST = REPO / "examples" / "dags.yaml"
GRAPH_MANIFEST = REPO / "devtools" / "showcase_dags.yaml"
#: The DAG with a task graph (``GRAPH_MANIFEST``): its tasks in order, with how long each takes
#: (seconds) and what each leaves in a run (``GRAPH_STATES``).
GRAPH_DAG = "warehouse_orders_daily_export_and_customer_dimension_refresh"
GRAPH_TASKS = (
    ("extract_orders", 12.4),
    ("transform_orders", 95.0),
    ("export_orders", 41.2),
    ("refresh_customers", 160.0),
    ("publish_report", 3.1),
)
#: Per graph run (oldest first): the run's state and its task instances' states, by task.
GRAPH_STATES = (
    ("success", ("success",) * 5),
    ("failed", ("success", "success", "success", "failed", "success")),
    ("running", ("success", "success", "running", "success", "scheduled")),
)
PRODUCER = ("asset_s3_bucket_producer", "produce_asset_events")
CONSUMER = ("asset_s3_bucket_consumer", "consume_asset_events")
ALIAS_PRODUCER = ("asset_alias_example_alias_producer", "produce_asset_events_through_asset_alias")
ALIAS_CONSUMER = ("asset_alias_example_alias_consumer", "consume_asset_alias_events")
MY_TASK = "s3://bucket/my-task"
OTHER = "s3://bucket/other-output"
USERNAME = "operator"
PASSWORD = "correct-horse-battery-staple"  # noqa: S105 - the demo user's, printed by the demo


@dataclass(frozen=True)
class Showcase:
    asset: Asset  # s3://bucket/my-task
    alias: AssetAlias
    newest_event: AssetEvent
    waiting_dag_id: str  # a consumer queued on ``asset``
    graph_run: DagRun  # the running run of ``GRAPH_DAG``


def _run_id(run_type: DagRunType, at: datetime) -> str:
    """The run id Airflow 3 (and the scheduler) gives: ``scheduled__<ISO>``, and for an
    asset-triggered run ``asset_triggered__<ISO with microseconds>_<8 letters/digits>``
    (deterministic here: the suffix depends only on the minute and second, which the seed's
    times fix, so the pages show the same ids whatever the hour it runs)."""
    if run_type == DagRunType.ASSET_TRIGGERED:
        at = at.replace(microsecond=(at.minute * 7919 + at.second * 104729) % 1_000_000)
        alphabet = "abcdefghijkmnpqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789"
        seed = (at.minute * 60 + at.second) * 104_729
        suffix = "".join(alphabet[(seed // 7**i) % len(alphabet)] for i in range(8))
        return DagRun.generate_run_id(
            run_type=run_type, logical_date=None, run_after=at, unique=suffix
        )
    return DagRun.generate_run_id(run_type=run_type, logical_date=at.replace(microsecond=0))


def _run(dag_id: str, task_id: str, at: datetime, *, state: str, run_type: DagRunType) -> DagRun:
    run = DagRun.objects.create(
        dag_id=dag_id,
        run_id=_run_id(run_type, at),
        run_type=run_type,
        state=state,
        run_after=at,
        created_at=at,  # when the scheduler made it (asset-triggered runs' consumption window)
        start_date=at,
        end_date=None if state == DagRunState.RUNNING else at + timedelta(seconds=40 + at.minute),
    )
    ti_state = {
        "success": TaskInstanceState.SUCCESS,
        "failed": TaskInstanceState.FAILED,
        "running": TaskInstanceState.RUNNING,
    }[state]
    TaskInstance.objects.create(
        dag_run=run,
        dag_id=dag_id,
        run_id=run.run_id,
        task_id=task_id,
        state=ti_state,
        start_date=at,
        end_date=run.end_date,
        duration=(run.end_date - at).total_seconds() if run.end_date else None,
        hostname="worker-1",
    )
    return run


def _emit(run: DagRun, task_id: str, asset: Asset, at: datetime, **extra: object) -> AssetEvent:
    return AssetEvent.objects.create(
        asset=asset,
        extra=extra,
        source_dag_id=run.dag_id,
        source_task_id=task_id,
        source_run_id=run.run_id,
        timestamp=at,
    )


def _times(now: datetime) -> list[datetime]:
    """When the producer ran: hourly (with gaps) over the last 48 h, 2-4 a day before."""
    top = now.replace(minute=0, second=0, microsecond=0)
    recent = [
        top - timedelta(hours=h) + timedelta(minutes=7, seconds=h * 13 % 60)
        for h in range(47, 0, -1)
        if h % 5 != 3
    ]
    older = [
        top - timedelta(days=d, hours=h) + timedelta(minutes=(d * 7 + h) % 60, seconds=d % 60)
        for d in range(30, 2, -1)
        for h in (2, 9, 15, 21)[: 2 + d % 3]
    ]
    return sorted(older) + recent


@transaction.atomic
def showcase_seed(*, now: datetime | None = None) -> Showcase:
    """Fill an empty database with a month of history (see the module docstring)."""
    now = now or timezone.now()
    if not get_user_model().objects.filter(username=USERNAME).exists():
        get_user_model().objects.create_superuser(USERNAME, "operator@example.com", PASSWORD)
    call_command("declare_dags", str(MANIFEST), stdout=None)
    call_command("declare_dags", str(GRAPH_MANIFEST), stdout=None)
    asset = Asset.objects.get(uri=MY_TASK)
    other, _ = Asset.objects.get_or_create(name="other-output", uri=OTHER)
    alias = AssetAlias.objects.get(name="example-alias")
    for target in (asset, other):
        AssetAliasAsset.objects.get_or_create(alias=alias, asset=target)
    newest = None
    times = _times(now)
    for i, at in enumerate(times):
        last = i == len(times) - 1
        failed = i % 23 == 11
        run = _run(
            *PRODUCER,
            at,
            state=DagRunState.FAILED if failed else DagRunState.SUCCESS,
            run_type=DagRunType.SCHEDULED,
        )
        if failed:
            continue
        newest = _emit(run, PRODUCER[1], asset, at + timedelta(seconds=31), rows=1000 + i * 7)
        if not last:
            consumer = _run(
                *CONSUMER,
                at + timedelta(minutes=1),
                state=DagRunState.SUCCESS,
                run_type=DagRunType.ASSET_TRIGGERED,
            )
            DagRunAssetEvent.objects.create(dag_run=consumer, event=newest)
        if i % 6 == 2:  # the alias producer writes both assets through the alias
            alias_run = _run(
                *ALIAS_PRODUCER,
                at + timedelta(minutes=20),
                state=DagRunState.SUCCESS,
                run_type=DagRunType.SCHEDULED,
            )
            for target in (asset, other):
                event = _emit(
                    alias_run, ALIAS_PRODUCER[1], target, at + timedelta(minutes=20, seconds=45)
                )
                AssetAliasAssetEvent.objects.create(alias=alias, event=event)
            consumer = _run(
                *ALIAS_CONSUMER,
                at + timedelta(minutes=21),
                state=DagRunState.SUCCESS,
                run_type=DagRunType.ASSET_TRIGGERED,
            )
            DagRunAssetEvent.objects.create(dag_run=consumer, event=event)
    assert newest is not None  # noqa: S101 - narrows the type for mypy
    # the newest event is not consumed yet: its consumer waits in the queue; one alias
    # producer is running right now
    AssetDagRunQueue.objects.create(
        asset=asset, target_dag_id=CONSUMER[0], created_at=newest.timestamp
    )
    _run(
        *ALIAS_PRODUCER,
        now - timedelta(minutes=2),
        state=DagRunState.RUNNING,
        run_type=DagRunType.MANUAL,
    )
    graph_run = _graph_runs(now)
    _operator_actions(graph_run)
    return Showcase(
        asset=asset,
        alias=alias,
        newest_event=newest,
        waiting_dag_id=CONSUMER[0],
        graph_run=graph_run,
    )


def _operator_actions(run: DagRun) -> None:
    """What an operator did through the admin and a command, as the audit log records it: the
    graph DAG paused and unpaused again, a note on its running run."""
    ui = Actor(name=USERNAME, via="ui", display_name="Operator")
    dags_set_paused(dag_ids=[GRAPH_DAG], is_paused=True, actor=ui)
    dags_set_paused(dag_ids=[GRAPH_DAG], is_paused=False, actor=Actor.of_command())
    dag_run_mark(
        dag_id=run.dag_id, run_id=run.run_id, note="waits on the warehouse's nightly load", actor=ui
    )


def _graph_runs(now: datetime) -> DagRun:
    """Three runs of ``GRAPH_DAG`` (``GRAPH_STATES``), the tasks one after the other along
    their edges; finished ``export_orders`` write ``orders`` and, through ``daily-exports``, the
    day's export file; ``refresh_customers`` writes ``customers`` (its ``Asset.ref``). Returns
    the running one."""
    orders = Asset.objects.get(name="orders")
    customers, _ = Asset.objects.get_or_create(
        name="customers", uri="postgres://warehouse/public/customers"
    )
    exports = AssetAlias.objects.get(name="daily-exports")
    durations = dict(GRAPH_TASKS)
    for days_ago, (run_state, ti_states) in zip((2, 1, 0), GRAPH_STATES, strict=True):
        start = (now - timedelta(days=days_ago, hours=3)).replace(microsecond=0)
        run = DagRun.objects.create(
            dag_id=GRAPH_DAG,
            run_id=_run_id(DagRunType.SCHEDULED, start),
            run_type=DagRunType.SCHEDULED,
            state=run_state,
            run_after=start,
            created_at=start,
            start_date=start,
        )
        ends: dict[str, datetime] = {}
        upstream = {"transform_orders": ["extract_orders"], "export_orders": ["transform_orders"]}
        upstream |= {"refresh_customers": ["transform_orders"]}
        upstream |= {"publish_report": ["export_orders", "refresh_customers"]}
        for (task_id, _), ti_state in zip(GRAPH_TASKS, ti_states, strict=True):
            began = max((ends[up] for up in upstream.get(task_id, [])), default=start)
            began += timedelta(seconds=2)
            finished = ti_state not in ("running", "scheduled")
            end = began + timedelta(seconds=durations[task_id]) if finished else None
            ends[task_id] = end or now
            TaskInstance.objects.create(
                dag_run=run,
                dag_id=GRAPH_DAG,
                run_id=run.run_id,
                task_id=task_id,
                state=ti_state,
                start_date=began if ti_state != "scheduled" else None,
                end_date=end,
                duration=durations[task_id] if finished else None,
                hostname="worker-2",
            )
            if ti_state != "success" or end is None:
                continue
            if task_id == "export_orders":
                _emit(run, task_id, orders, end, rows=5200 + days_ago)
                day = f"s3://warehouse/exports/{start.date().isoformat()}.csv"
                export, _ = Asset.objects.get_or_create(name=day, uri=day)
                AssetAliasAsset.objects.get_or_create(alias=exports, asset=export)
                event = _emit(run, task_id, export, end)
                AssetAliasAssetEvent.objects.create(alias=exports, event=event)
            elif task_id == "refresh_customers":
                _emit(run, task_id, customers, end, rows=880)
        if run_state != "running":
            run.end_date = max(ends.values())
            run.save(update_fields=["end_date"])
    return run  # the last: running
