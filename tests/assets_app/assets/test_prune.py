"""``prune_asset_events``: retention that keeps the events a queued consumer DAG still waits for.

"Waiting" is the scheduler's own rule (``events_awaiting_consumers``): the events the next
asset-triggered run of a DAG with queue rows would consume. The scenarios check it against the
scheduler itself: what a prune keeps is what the next pass consumes.
"""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from assets_app.models import (
    Asset,
    AssetAlias,
    AssetAliasAsset,
    AssetAliasAssetEvent,
    AssetDagRunQueue,
    AssetEvent,
    Dag,
    DagRun,
    DagRunAssetEvent,
    DagScheduleAssetAliasReference,
    DagScheduleAssetReference,
)
from assets_app.services.assets.events import (
    PruneProgress,
    asset_event_create_manual,
    asset_events_prune,
)
from assets_app.services.scheduling.scheduler import scheduler_pass
from tests.factories import AssetAliasFactory, AssetEventFactory, AssetFactory, DagFactory

pytestmark = pytest.mark.django_db

NOW = timezone.now()


def days_ago(days: float):
    return timezone.now() - timedelta(days=days)


def consumer_of(dag_id: str, asset: Asset, **fields) -> Dag:
    """A DAG scheduled on ``asset`` (expression and reference, as ``declare_dags`` writes)."""
    dag = DagFactory(
        dag_id=dag_id,
        asset_expression={"asset": {"name": asset.name, "uri": asset.uri}},
        task_ids=["t"],
        **fields,
    )
    DagScheduleAssetReference.objects.create(asset=asset, dag=dag)
    return dag


def alias_consumer_of(dag_id: str, alias: AssetAlias) -> Dag:
    dag = DagFactory(
        dag_id=dag_id, asset_expression={"alias": {"name": alias.name}}, task_ids=["t"]
    )
    DagScheduleAssetAliasReference.objects.create(alias=alias, dag=dag)
    return dag


def emit(asset: Asset, *, at, **fields) -> AssetEvent:
    """A manual event on ``asset`` (queueing its consumers), then dated ``at``."""
    event = asset_event_create_manual(name=asset.name, uri=asset.uri, **fields)
    AssetEvent.objects.filter(pk=event.pk).update(timestamp=at)
    return event


def emit_through(alias: AssetAlias, asset: Asset, *, at) -> AssetEvent:
    """An event emitted through ``alias`` (as registration writes it), with its queue rows."""
    event = AssetEventFactory(asset=asset, timestamp=at)
    AssetAliasAsset.objects.get_or_create(alias=alias, asset=asset)
    AssetAliasAssetEvent.objects.create(alias=alias, event=event)
    for ref in DagScheduleAssetAliasReference.objects.filter(alias=alias):
        AssetDagRunQueue.objects.get_or_create(asset=asset, target_dag_id=ref.dag_id)
    return event


def schedule(*, created_at=None) -> list[DagRun]:
    """One scheduler pass; the runs it created, dated ``created_at`` when given."""
    created = scheduler_pass().created
    runs = list(DagRun.objects.filter(pk__in=[r.dag_run_pk for r in created]))
    if created_at is not None:
        DagRun.objects.filter(pk__in=[r.pk for r in runs]).update(created_at=created_at)
    return runs


def remaining() -> set[int]:
    return set(AssetEvent.objects.values_list("pk", flat=True))


def prune(*args: str) -> str:
    out = io.StringIO()
    call_command("prune_asset_events", "--older-than-days=30", *args, stdout=out)
    return out.getvalue()


# --- what is kept ---------------------------------------------------------------------------


def test_unconsumed_event_survives_a_prune_that_removes_its_consumed_neighbours():
    # given: two old events consumed by the consumer's run 45 days ago, then a third one
    # (40 days old) queued but not consumed yet, and an old event nobody consumes
    orders = AssetFactory(name="orders")
    consumer_of("orders_report", orders)
    first, second = emit(orders, at=days_ago(50)), emit(orders, at=days_ago(49))
    (run,) = schedule(created_at=days_ago(45))
    pending = emit(orders, at=days_ago(40))
    lonely = emit(AssetFactory(name="unwatched"), at=days_ago(40))
    recent = emit(AssetFactory(name="fresh"), at=days_ago(1))
    assert set(run.consumed_events.values_list("pk", flat=True)) == {first.pk, second.pk}

    # when
    out = prune()

    # then: the consumed and the unwatched old events go, the waiting one stays
    assert out.strip().endswith("; kept 1 still waiting for a consumer")
    assert out.startswith("Deleted 3 asset event(s) older than ")
    assert remaining() == {pending.pk, recent.pk}
    assert not DagRunAssetEvent.objects.exists()
    # and it is exactly what the consumer's next run consumes
    (next_run,) = schedule()
    assert list(next_run.consumed_events.values_list("pk", flat=True)) == [pending.pk]
    assert lonely.pk not in remaining()

    # when: consumed now, the next prune removes it
    out = prune()

    # then
    assert out.startswith("Deleted 1 asset event(s)")
    assert remaining() == {recent.pk}


def test_include_unconsumed_deletes_waiting_events_too():
    # given
    orders = AssetFactory(name="orders")
    consumer_of("orders_report", orders)
    emit(orders, at=days_ago(40))

    # when
    out = prune("--include-unconsumed")

    # then: no "kept" part in the summary: nothing was checked
    assert out.strip().startswith("Deleted 1 asset event(s) older than ")
    assert "kept" not in out
    assert not AssetEvent.objects.exists()
    assert AssetDagRunQueue.objects.filter(target_dag_id="orders_report").exists()


def test_dry_run_counts_what_a_prune_would_delete_and_keep():
    # given: 3 consumed, 2 waiting, 1 unwatched old events, 1 recent one
    orders = AssetFactory(name="orders")
    consumer_of("orders_report", orders)
    for day in (60, 59, 58):
        emit(orders, at=days_ago(day))
    schedule(created_at=days_ago(55))
    emit(orders, at=days_ago(50))
    emit(orders, at=days_ago(49))
    emit(AssetFactory(name="unwatched"), at=days_ago(40))
    emit(orders, at=days_ago(2))
    before = remaining()

    # when
    dry = prune("--dry-run")

    # then: counted, nothing deleted
    assert dry.startswith("Would delete 4 asset event(s) older than ")
    assert dry.strip().endswith("; kept 2 still waiting for a consumer")
    assert remaining() == before

    # and the real prune does what the dry run said
    assert prune().startswith("Deleted 4 asset event(s)")
    assert len(remaining()) == 3
    assert prune("--dry-run", "--include-unconsumed").startswith("Would delete 2 asset event(s)")


def test_events_older_than_the_lookback_of_the_previous_run_are_not_waiting():
    # given: the consumer's previous run was created 20 days ago; an event stamped 40 days ago
    # (committed late, say) is queued but the scheduler's lookback does not reach it
    orders = AssetFactory(name="orders")
    consumer_of("orders_report", orders)
    emit(orders, at=days_ago(25))
    schedule(created_at=days_ago(20))
    stale = emit(orders, at=days_ago(40))
    assert AssetDagRunQueue.objects.filter(target_dag_id="orders_report").exists()

    # when
    out = prune()

    # then: deleted (the next pass would not consume it either, see below)
    assert out.startswith("Deleted 1 asset event(s)")
    assert "kept 0 still waiting" in out
    assert stale.pk not in remaining()


def test_next_pass_would_not_consume_an_event_older_than_the_lookback():
    # the rule the previous test relies on, checked against the scheduler itself
    orders = AssetFactory(name="orders")
    consumer_of("orders_report", orders)
    emit(orders, at=days_ago(25))
    schedule(created_at=days_ago(20))
    stale = emit(orders, at=days_ago(40))
    emit(orders, at=days_ago(1))

    (run,) = schedule()

    assert stale.pk not in set(run.consumed_events.values_list("pk", flat=True))


def test_alias_consumer_waits_only_for_events_emitted_through_its_alias():
    # given: a DAG scheduled on an alias; one old event through the alias, one direct event on
    # the same asset (which the alias consumer does not consume)
    alias = AssetAliasFactory(name="daily-exports")
    export = AssetFactory(name="export-1")
    alias_consumer_of("exports_report", alias)
    through = emit_through(alias, export, at=days_ago(40))
    direct = AssetEventFactory(asset=export, timestamp=days_ago(40))

    # when
    out = prune()

    # then
    assert "kept 1 still waiting" in out
    assert remaining() == {through.pk}
    assert direct.pk not in remaining()
    (run,) = schedule()
    assert list(run.consumed_events.values_list("pk", flat=True)) == [through.pk]


def test_paused_and_stale_consumers_keep_their_events_waiting():
    # given: events queued for consumers that were then paused or marked stale
    paused_asset, stale_asset = AssetFactory(name="a"), AssetFactory(name="b")
    paused = consumer_of("paused_consumer", paused_asset)
    stale = consumer_of("stale_consumer", stale_asset)
    kept = {emit(paused_asset, at=days_ago(40)).pk, emit(stale_asset, at=days_ago(40)).pk}
    Dag.objects.filter(pk=paused.pk).update(is_paused=True)
    Dag.objects.filter(pk=stale.pk).update(is_stale=True)

    # when
    out = prune()

    # then
    assert "kept 2 still waiting" in out
    assert remaining() == kept


def test_partitioned_events_and_dags_no_longer_asset_scheduled_wait_for_nothing():
    # given: a partitioned event (never consumed by the scheduler's runs), and a queue row of a
    # DAG whose schedule is no longer on assets (the scheduler drops its rows)
    orders = AssetFactory(name="orders")
    consumer_of("orders_report", orders)
    emit(orders, at=days_ago(40), partition_key="2026-01-01")
    other = AssetFactory(name="other")
    rescheduled = DagFactory(dag_id="rescheduled", asset_expression=None)
    AssetEventFactory(asset=other, timestamp=days_ago(40))
    AssetDagRunQueue.objects.create(asset=other, target_dag=rescheduled)

    # when
    out = prune()

    # then
    assert out.startswith("Deleted 2 asset event(s)")
    assert "kept 0 still waiting" in out
    assert not AssetEvent.objects.exists()


def test_dag_with_an_unreadable_expression_keeps_the_unconsumed_events_of_its_queued_assets():
    # given
    orders = AssetFactory(name="orders")
    broken = DagFactory(dag_id="broken", asset_expression={"nonsense": {}})
    event = AssetEventFactory(asset=orders, timestamp=days_ago(40))
    AssetDagRunQueue.objects.create(asset=orders, target_dag=broken)

    # when
    out = prune()

    # then
    assert "kept 1 still waiting" in out
    assert remaining() == {event.pk}


# --- batches, progress, output --------------------------------------------------------------


def test_batches_walk_every_old_event_once_keeping_the_waiting_ones_in_place():
    # given: 7 old events, alternately waiting (on a queued consumer's asset) and not
    orders, other = AssetFactory(name="orders"), AssetFactory(name="other")
    consumer_of("orders_report", orders)
    waiting = {emit(orders, at=days_ago(50 - 2 * i)).pk for i in range(4)}
    for i in range(3):
        emit(other, at=days_ago(49 - 2 * i))
    seen: list[PruneProgress] = []

    # when
    result = asset_events_prune(older_than=days_ago(30), batch_size=2, progress=seen.append)

    # then: one progress report before the first batch and one after each batch of 2
    assert [(p.examined, p.deleted, p.kept_unconsumed) for p in seen] == [
        (0, 0, 0),
        (2, 1, 1),
        (4, 2, 2),
        (6, 3, 3),
        (7, 3, 4),
    ]
    assert {p.total for p in seen} == {7}
    assert (result.deleted, result.kept_unconsumed) == (3, 4)
    assert remaining() == waiting


@pytest.mark.parametrize("batch_size", [1, 2, 1000])
def test_batch_size_does_not_change_the_outcome(batch_size):
    # given
    orders = AssetFactory(name="orders")
    consumer_of("orders_report", orders)
    for day in (60, 59):
        emit(orders, at=days_ago(day))
    schedule(created_at=days_ago(55))
    pending = {emit(orders, at=days_ago(day)).pk for day in (50, 45, 40)}
    for day in (50, 45, 40):
        emit(AssetFactory(), at=days_ago(day))

    # when
    result = asset_events_prune(older_than=days_ago(30), batch_size=batch_size)

    # then
    assert (result.deleted, result.kept_unconsumed) == (5, 3)
    assert remaining() == pending


def test_queries_per_batch_do_not_grow_with_the_batch():
    orders = AssetFactory(name="orders")
    consumer_of("orders_report", orders)

    def queries_for(events: int) -> int:
        AssetEvent.objects.all().delete()
        for _ in range(events):
            emit(orders, at=days_ago(40))
            emit(AssetFactory(), at=days_ago(40))
        with CaptureQueriesContext(connection) as ctx:
            result = asset_events_prune(older_than=days_ago(30), batch_size=1000)
        assert (result.deleted, result.kept_unconsumed) == (events, events)
        return len(ctx)

    # the one batch (a savepoint here, inside the test's transaction): the candidates; the
    # waiting rule (the queued DAGs with their previous runs, asset keys) and the waiting
    # candidates; the deletion (the ids, alias links, run links, events); release. Then the
    # empty batch that ends the walk (savepoint, candidates, release).
    assert queries_for(10) == queries_for(100) == 2 + 8 + 3


def test_bad_batch_size_is_an_invalid_input():
    with pytest.raises(Exception, match="batch size must be positive"):
        asset_events_prune(older_than=NOW, batch_size=0)


def test_non_terminal_output_is_one_summary_line():
    for _ in range(3):
        AssetEventFactory(timestamp=days_ago(40))

    out = prune("--batch-size=2")

    assert "\r" not in out
    assert out.count("\n") == 1
    assert out.startswith("Deleted 3 asset event(s)")
