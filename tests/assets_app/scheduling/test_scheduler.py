"""The scheduler service and command: queue rows → asset-triggered DAG runs."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from assets_app.models import (
    Asset,
    AssetActive,
    AssetAlias,
    AssetAliasAsset,
    AssetAliasAssetEvent,
    AssetDagRunQueue,
    AssetEvent,
    Dag,
    DagRun,
    DagRunAssetEvent,
    DagTask,
    TaskInstance,
    TaskOutletAssetReference,
)
from assets_app.outlets import AliasOutletEvent, OutletProfile, OutletType
from assets_app.services.assets.consumption import EVENT_LOOKBACK
from assets_app.services.assets.registration import asset_changes_register
from assets_app.services.runs.claims import task_instances_claim
from assets_app.services.scheduling.queue_watch import QueueWatch
from assets_app.services.scheduling.scheduler import (
    Outcome,
    dag_asset_triggered_run_create,
    dags_asset_triggered_runs_create,
    scheduler_pass,
)
from assets_app.services.sql import model_rows_insert
from assets_app.tokens import token_issue
from task_sdk.definitions import AssetUniqueKey
from tests.factories import (
    AssetAliasFactory,
    AssetEventFactory,
    AssetFactory,
    DagFactory,
    TaskInstanceFactory,
)
from tests.live_server import REPO

pytestmark = pytest.mark.django_db

SEED_URI = "s3://bucket/my-task"
RUN_ID = re.compile(r"asset_triggered__\d{4}-\d\d-\d\dT[\d:.]+\+00:00_[A-Za-z0-9]{8}")


# --- helpers ------------------------------------------------------------------------------


def asset_node(asset: Asset) -> dict:
    return {"asset": {"name": asset.name, "uri": asset.uri}}


def consumer(dag_id: str, expression: dict | None, **fields) -> Dag:
    return DagFactory(
        dag_id=dag_id, asset_expression=expression, task_ids=fields.pop("task_ids", ["t"]), **fields
    )


def emit(asset: Asset, *, via: AssetAlias | None = None, **fields) -> AssetEvent:
    """An event on ``asset`` (through ``via`` when given), as registration would write it."""
    event = AssetEventFactory(asset=asset, **fields)
    if via is not None:
        AssetAliasAsset.objects.get_or_create(alias=via, asset=asset)
        AssetAliasAssetEvent.objects.create(alias=via, event=event)
    return event


def queue(dag: Dag, asset: Asset) -> None:
    AssetDagRunQueue.objects.get_or_create(target_dag=dag, asset=asset)


def consumed(run: DagRun) -> set[int]:
    return set(run.event_links.values_list("event_id", flat=True))


def runs_of(dag: Dag) -> list[DagRun]:
    return list(DagRun.objects.filter(dag=dag).order_by("created_at", "id"))


def activate(asset: Asset) -> None:
    AssetActive.objects.create(asset=asset, name=asset.name, uri=asset.uri)


# --- the seed scenario --------------------------------------------------------------------


@pytest.fixture
def seed_consumers():
    """The two consumer DAGs of Airflow's example_asset_alias.py."""
    asset = AssetFactory(name=SEED_URI, uri=SEED_URI)
    activate(asset)
    alias = AssetAliasFactory(name="example-alias")
    by_alias = consumer(
        "asset_alias_example_alias_consumer",
        {"alias": {"name": "example-alias"}},
        task_ids=["consume_asset_event_from_asset_alias"],
    )
    by_asset = consumer(
        "asset_s3_bucket_consumer",
        asset_node(asset),
        task_ids=["consume_asset_event"],
    )
    return asset, alias, by_alias, by_asset


def test_seed_alias_event_triggers_both_consumers_once(seed_consumers):
    # given: the alias producer's event, queued for both consumers
    asset, alias, by_alias, by_asset = seed_consumers
    event = emit(
        asset,
        via=alias,
        source_dag_id="asset_alias_example_alias_producer",
        source_task_id="produce_asset_events_through_asset_alias",
    )
    queue(by_alias, asset)
    queue(by_asset, asset)

    # when
    first = scheduler_pass()
    second = scheduler_pass()

    # then: one run of each, each consuming the event; the second pass creates nothing
    assert sorted(run.dag_id for run in first.created) == [
        "asset_alias_example_alias_consumer",
        "asset_s3_bucket_consumer",
    ]
    assert second.created == []
    for dag in (by_alias, by_asset):
        (run,) = runs_of(dag)
        assert consumed(run) == {event.pk}
        assert run.run_type == "asset_triggered"
        assert run.state == "running"  # started at once: its DAG has room
        assert run.logical_date is None
        assert run.data_interval_start is None
        assert RUN_ID.fullmatch(run.run_id)
        assert list(run.task_instances.values_list("task_id", "state", "try_number")) == [
            (dag.task_ids[0], "scheduled", 1)
        ]
    assert set(event.created_dagruns.values_list("dag_id", flat=True)) == {
        "asset_alias_example_alias_consumer",
        "asset_s3_bucket_consumer",
    }
    assert not AssetDagRunQueue.objects.exists()


def test_seed_full_path_declare_register_then_pass():
    # given: the seed's DAGs declared from the example manifest, the alias producer succeeding
    call_command("declare_dags", str(REPO / "examples" / "dags.yaml"), stdout=StringIO())
    ti = TaskInstanceFactory(
        dag_run__dag=Dag.objects.get(dag_id="asset_alias_example_alias_producer"),
        task_id="produce_asset_events_through_asset_alias",
        state="running",
    )
    registered = asset_changes_register(
        task_instance=ti,
        task_outlets=[OutletProfile(type=OutletType.ALIAS, name="example-alias")],
        outlet_events=[
            AliasOutletEvent(
                source_alias_name="example-alias",
                dest_asset_key=AssetUniqueKey(name=SEED_URI, uri=SEED_URI),
            )
        ],
    )
    (event_id,) = registered.event_ids

    # when
    first = scheduler_pass()
    second = scheduler_pass()

    # then
    assert sorted((run.dag_id, run.event_ids) for run in first.created) == [
        ("asset_alias_example_alias_consumer", (event_id,)),
        ("asset_s3_bucket_consumer", (event_id,)),
    ]
    assert all(run.task_ids for run in first.created)
    assert second.created == []
    assert not AssetDagRunQueue.objects.exists()


def test_scheduled_task_instance_starts_with_its_runs_consumed_events(seed_consumers):
    # given: a run created by the scheduler from the seed's alias event
    asset, alias, by_alias, _ = seed_consumers
    event = emit(asset, via=alias)
    queue(by_alias, asset)
    (created,) = scheduler_pass().created
    (ti,) = task_instances_claim(limit=10)
    assert ti.dag_run_id == created.dag_run_pk
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token_issue(task_instance_id=ti.pk)}")

    # when: the worker starts the task instance it claimed
    response = client.patch(
        f"/execution/task-instances/{ti.pk}/run",
        {
            "state": "running",
            "hostname": "worker",
            "unixname": "airflow",
            "pid": 1,
            "start_date": timezone.now().isoformat(),
        },
        format="json",
    )

    # then: the run context lists the consumed event; the event lists the run it created
    assert response.status_code == 200, response.content
    dag_run = response.json()["dag_run"]
    assert dag_run["run_id"] == created.run_id
    assert dag_run["run_type"] == "asset_triggered"
    assert dag_run["logical_date"] is None
    (consumed_event,) = dag_run["consumed_asset_events"]
    assert consumed_event["asset"]["uri"] == SEED_URI
    assert consumed_event["source_task_id"] == event.source_task_id
    assert consumed_event["source_aliases"] == [{"name": "example-alias"}]
    assert [run.run_id for run in event.created_dagruns.all()] == [created.run_id]


def test_run_after_is_the_newest_queue_row(seed_consumers):
    # given
    asset, _, _, by_asset = seed_consumers
    emit(asset)
    queued_at = timezone.now() - timedelta(minutes=3)
    AssetDagRunQueue.objects.create(target_dag=by_asset, asset=asset, created_at=queued_at)

    # when
    (created,) = scheduler_pass().created

    # then
    run = DagRun.objects.get(pk=created.dag_run_pk)
    assert run.run_after == queued_at
    assert run.run_id.startswith(f"asset_triggered__{queued_at.isoformat()}_")


# --- conditions ---------------------------------------------------------------------------


def test_all_of_waits_for_every_asset_and_consumes_both():
    # given
    a, b = AssetFactory(), AssetFactory()
    dag = consumer("both", {"all": [asset_node(a), asset_node(b)]})
    event_a = emit(a)
    queue(dag, a)

    # when: only a has an event
    assert scheduler_pass().created == []

    # then: the row waits; after b's event the run consumes both
    assert AssetDagRunQueue.objects.filter(target_dag=dag).count() == 1
    event_b = emit(b)
    queue(dag, b)
    (created,) = scheduler_pass().created
    assert set(created.event_ids) == {event_a.pk, event_b.pk}
    assert not AssetDagRunQueue.objects.filter(target_dag=dag).exists()


def test_any_of_runs_after_either():
    # given
    a, b = AssetFactory(), AssetFactory()
    dag = consumer("either", {"any": [asset_node(a), asset_node(b)]})
    event_b = emit(b)
    queue(dag, b)

    # when
    (created,) = scheduler_pass().created

    # then
    assert created.event_ids == (event_b.pk,)


def test_nested_condition():
    # given: (a or b) and c
    a, b, c = AssetFactory(), AssetFactory(), AssetFactory()
    dag = consumer("nested", {"all": [{"any": [asset_node(a), asset_node(b)]}, asset_node(c)]})
    event_a, event_b = emit(a), emit(b)
    queue(dag, a)
    queue(dag, b)

    # when / then: not without c
    assert scheduler_pass().created == []
    event_c = emit(c)
    queue(dag, c)
    (created,) = scheduler_pass().created
    assert set(created.event_ids) == {event_a.pk, event_b.pk, event_c.pk}


def test_an_empty_all_inside_an_all_holds_as_in_airflow():
    # given: all(all(), a): Airflow's all() of nothing holds, so a alone decides
    a = AssetFactory()
    dag = consumer("vacuous", {"all": [{"all": []}, asset_node(a)]})
    event = emit(a)
    queue(dag, a)

    # when
    (created,) = scheduler_pass().created

    # then
    assert created.event_ids == (event.pk,)


def test_an_empty_any_inside_an_all_never_holds():
    a = AssetFactory()
    dag = consumer("never", {"all": [{"any": []}, asset_node(a)]})
    emit(a)
    queue(dag, a)

    result = scheduler_pass()

    assert result.created == []
    assert result.count(Outcome.NOT_READY) == 1


def test_a_dag_on_an_empty_all_gets_no_run_from_rows_left_by_its_old_schedule():
    # given: a DAG redeclared onto all() of nothing (which nothing queues), a row left over
    a = AssetFactory()
    dag = consumer("on_nothing", {"all": []})
    emit(a)
    queue(dag, a)

    # when
    result = scheduler_pass()

    # then its condition holds, but a run is made only for events to consume
    assert result.created == []
    assert result.count(Outcome.NOTHING_TO_CONSUME) == 1
    assert not AssetDagRunQueue.objects.exists()


def test_alias_without_resolved_assets_is_not_satisfied():
    # given: the DAG waits on an alias nothing has emitted through, and on asset a
    a = AssetFactory()
    AssetAliasFactory(name="never-used")
    dag = consumer("alias-or-nothing", {"all": [{"alias": {"name": "never-used"}}, asset_node(a)]})
    emit(a)
    queue(dag, a)

    # when
    result = scheduler_pass()

    # then
    assert result.created == []
    assert result.count(Outcome.NOT_READY) == 1


def test_alias_condition_consumes_only_events_emitted_through_the_alias():
    # given: asset x is resolved from the alias; x also has a direct (non-alias) event
    x = AssetFactory()
    alias = AssetAliasFactory()
    dag = consumer("on-alias", {"alias": {"name": alias.name}})
    direct = emit(x)
    through_alias = emit(x, via=alias)
    queue(dag, x)

    # when
    (created,) = scheduler_pass().created

    # then: as in Airflow, the alias consumer takes the events emitted through the alias
    assert created.event_ids == (through_alias.pk,)
    assert direct.pk not in created.event_ids


def test_alias_inside_all_of():
    # given
    x, b = AssetFactory(), AssetFactory()
    alias = AssetAliasFactory()
    dag = consumer("alias-and-b", {"all": [{"alias": {"name": alias.name}}, asset_node(b)]})
    via = emit(x, via=alias)
    queue(dag, x)
    assert scheduler_pass().created == []

    # when
    event_b = emit(b)
    queue(dag, b)
    (created,) = scheduler_pass().created

    # then
    assert set(created.event_ids) == {via.pk, event_b.pk}


@pytest.mark.parametrize(
    "ref",
    [
        pytest.param(lambda a: {"asset_ref": {"name": a.name}}, id="name-ref"),
        pytest.param(lambda a: {"asset_ref": {"uri": a.uri}}, id="uri-ref"),
    ],
)
def test_ref_condition_counts_as_the_active_asset_it_names(ref):
    # given
    a = AssetFactory()
    activate(a)
    dag = consumer("on-ref", ref(a))
    event = emit(a)
    queue(dag, a)

    # when
    (created,) = scheduler_pass().created

    # then
    assert created.event_ids == (event.pk,)


def test_ref_to_an_inactive_asset_is_not_satisfied():
    # given: a is not active, so the name ref resolves to nothing
    a = AssetFactory()
    dag = consumer("on-inactive-ref", {"asset_ref": {"name": a.name}})
    emit(a)
    queue(dag, a)

    # when / then
    assert scheduler_pass().created == []
    assert AssetDagRunQueue.objects.filter(target_dag=dag).exists()


# --- which events a run consumes ----------------------------------------------------------


def test_many_events_one_run_then_a_later_run_consumes_only_new_ones():
    # given: many events before the pass
    a = AssetFactory()
    dag = consumer("many", asset_node(a))
    first_batch = {emit(a).pk for _ in range(25)}
    queue(dag, a)

    # when
    (first,) = scheduler_pass().created
    later = emit(a)
    queue(dag, a)
    (second,) = scheduler_pass().created

    # then: none lost, none consumed twice
    assert set(first.event_ids) == first_batch
    assert second.event_ids == (later.pk,)
    assert DagRunAssetEvent.objects.filter(dag_run__dag=dag).count() == 26


def test_first_run_consumes_history_but_not_other_assets_events():
    # given: an older event on the scheduled asset, events on another asset
    a, other = AssetFactory(), AssetFactory()
    old = emit(a, timestamp=timezone.now() - timedelta(days=30))
    emit(other)
    dag = consumer("history", asset_node(a))
    new = emit(a)
    queue(dag, a)

    # when
    (created,) = scheduler_pass().created

    # then: like Airflow, the first run has no lower bound
    assert created.event_ids == (old.pk, new.pk)


def test_event_committed_late_is_consumed_by_the_next_run_not_lost():
    # given: a run was created; then an event whose timestamp is older than that run commits
    a = AssetFactory()
    dag = consumer("late", asset_node(a))
    early = emit(a)
    queue(dag, a)
    (first,) = scheduler_pass().created
    run_created = DagRun.objects.get(pk=first.dag_run_pk).created_at
    late = emit(a, timestamp=run_created - timedelta(seconds=2))
    queue(dag, a)

    # when
    (second,) = scheduler_pass().created

    # then
    assert first.event_ids == (early.pk,)
    assert second.event_ids == (late.pk,)


def test_a_later_run_does_not_reach_back_past_the_lookback_before_the_previous_run():
    # given: a run was created; then events older than EVENT_LOOKBACK before it, and a new one
    a = AssetFactory()
    dag = consumer("lookback", asset_node(a))
    emit(a)
    queue(dag, a)
    (first,) = scheduler_pass().created
    run_created = DagRun.objects.get(pk=first.dag_run_pk).created_at
    emit(a, timestamp=run_created - EVENT_LOOKBACK - timedelta(minutes=1))
    inside = emit(a, timestamp=run_created - EVENT_LOOKBACK + timedelta(minutes=1))
    new = emit(a)
    queue(dag, a)

    # when
    (second,) = scheduler_pass().created

    # then: the scan starts EVENT_LOOKBACK before the previous run was created
    assert second.event_ids == (inside.pk, new.pk)


def test_event_stamped_ahead_of_the_schedulers_clock_is_consumed_not_dropped():
    # given: the producer's host clock runs slightly ahead of the scheduler's; its event and
    # queue row are committed
    a = AssetFactory()
    dag = consumer("skewed", asset_node(a))
    event = emit(a, timestamp=timezone.now() + timedelta(seconds=1))
    queue(dag, a)

    # when
    result = scheduler_pass()

    # then: the run consumes it (deleting the queue row without consuming the event would leave
    # it unconsumed until some later event on the asset)
    (created,) = result.created
    assert created.event_ids == (event.pk,)
    assert not AssetDagRunQueue.objects.exists()


def test_other_dags_consumption_does_not_hide_events():
    # given: two consumers of a; the first already ran on the event
    a = AssetFactory()
    one, two = consumer("one", asset_node(a)), consumer("two", asset_node(a))
    event = emit(a)
    queue(one, a)
    scheduler_pass()

    # when
    queue(two, a)
    (created,) = scheduler_pass().created

    # then
    assert created.dag_id == "two"
    assert created.event_ids == (event.pk,)


def test_queue_rows_whose_events_are_all_consumed_create_no_run():
    # given: the event was consumed, yet a queue row for it remains (a producer raced the pass)
    a = AssetFactory()
    dag = consumer("raced", asset_node(a))
    emit(a)
    queue(dag, a)
    scheduler_pass()
    queue(dag, a)

    # when
    result = scheduler_pass()

    # then: no second run for the same event; the row is gone
    assert result.created == []
    assert result.count(Outcome.NOTHING_TO_CONSUME) == 1
    assert len(runs_of(dag)) == 1
    assert not AssetDagRunQueue.objects.exists()


def test_partitioned_events_are_not_consumed():
    # given
    a = AssetFactory()
    dag = consumer("unpartitioned", asset_node(a))
    emit(a, partition_key="2025-01-01")
    plain = emit(a)
    queue(dag, a)

    # when
    (created,) = scheduler_pass().created

    # then
    assert created.event_ids == (plain.pk,)


# --- paused, stale, unscheduled DAGs ------------------------------------------------------


def test_paused_consumer_waits_until_unpaused():
    # given
    a = AssetFactory()
    dag = consumer("paused", asset_node(a), is_paused=True)
    event = emit(a)
    queue(dag, a)

    # when
    paused_pass = scheduler_pass()
    Dag.objects.filter(pk=dag.pk).update(is_paused=False)
    unpaused_pass = scheduler_pass()

    # then
    assert paused_pass.outcomes == []
    assert [run.event_ids for run in unpaused_pass.created] == [(event.pk,)]


def test_stale_consumer_keeps_its_queue_rows_and_gets_no_run():
    # given
    a = AssetFactory()
    dag = consumer("stale", asset_node(a), is_stale=True)
    emit(a)
    queue(dag, a)

    # when
    result = scheduler_pass()
    direct = dag_asset_triggered_run_create(dag_id=dag.dag_id)

    # then
    assert result.outcomes == []
    assert direct.outcome is Outcome.INACTIVE
    assert AssetDagRunQueue.objects.filter(target_dag=dag).exists()
    assert not DagRun.objects.exists()


def test_dag_no_longer_asset_scheduled_drops_its_rows():
    # given
    a = AssetFactory()
    dag = consumer("rescheduled", None)
    emit(a)
    queue(dag, a)

    # when
    result = scheduler_pass()

    # then
    assert result.count(Outcome.DROPPED) == 1
    assert not AssetDagRunQueue.objects.exists()
    assert not DagRun.objects.exists()


def test_invalid_expression_keeps_rows_and_does_not_stop_the_pass(caplog):
    # given
    a = AssetFactory()
    broken = consumer("broken", {"nonsense": 1})
    fine = consumer("fine", asset_node(a))
    emit(a)
    queue(broken, a)
    queue(fine, a)

    # when
    result = scheduler_pass()

    # then
    assert [run.dag_id for run in result.created] == ["fine"]
    assert result.count(Outcome.INVALID) == 1
    assert AssetDagRunQueue.objects.filter(target_dag=broken).exists()
    assert "broken" in caplog.text


# --- task instances -----------------------------------------------------------------------


def test_task_instances_from_declared_tasks():
    # given
    a = AssetFactory()
    dag = consumer("tasks", asset_node(a), task_ids=["extract", "transform", "load"])
    emit(a)
    queue(dag, a)

    # when
    (created,) = scheduler_pass().created

    # then
    tis = TaskInstance.objects.filter(dag_run_id=created.dag_run_pk).order_by("task_id")
    assert [(ti.task_id, ti.state, ti.run_id, ti.map_index) for ti in tis] == [
        ("extract", "scheduled", created.run_id, -1),
        ("load", "scheduled", created.run_id, -1),
        ("transform", "scheduled", created.run_id, -1),
    ]


def test_created_rows_hold_what_the_models_would_have_written():
    # given
    a = AssetFactory()
    dag = consumer("defaults", asset_node(a), task_ids=["t"])
    DagTask.objects.create(dag=dag, task_id="t", retries=2)
    emit(a)
    queue(dag, a)
    before = timezone.now()

    # when
    (created,) = scheduler_pass().created

    # then: the run and its task instance as the ORM would have created them
    run = DagRun.objects.get(pk=created.dag_run_pk)
    assert (run.dag_id, run.run_id, run.run_type, run.state) == (
        "defaults",
        created.run_id,
        "asset_triggered",
        "running",
    )
    assert (run.logical_date, run.data_interval_start, run.data_interval_end) == (None,) * 3
    assert (run.end_date, run.partition_key, run.conf) == (None, None, {})
    assert run.start_date == run.created_at
    assert run.run_after == AssetDagRunQueue(created_at=created.run_after).created_at
    assert before <= run.created_at <= timezone.now()
    ti = TaskInstance.objects.get(dag_run=run)
    assert isinstance(ti.pk, uuid.UUID)
    assert (ti.dag_id, ti.run_id, ti.task_id, ti.map_index, ti.state) == (
        "defaults",
        created.run_id,
        "t",
        -1,
        "scheduled",
    )
    assert (ti.try_number, ti.max_tries, ti.task_reschedule_count) == (1, 2, 0)
    assert (ti.hostname, ti.unixname, ti.failure_reason, ti.rendered_fields) == ("", "", "", {})
    assert (ti.start_date, ti.end_date, ti.pid, ti.next_kwargs, ti.next_retry_at) == (None,) * 5
    assert before <= ti.updated_at <= timezone.now()


def test_row_insert_refuses_to_share_a_per_row_default():
    # given: task instance rows without their ids (uuid4: one per row, not one per statement)
    dag_run = DagRun.objects.create(dag=consumer("ids", asset_node(AssetFactory())), run_id="r")
    rows = [{"dag_run": dag_run.pk, "dag_id": "ids", "run_id": "r", "task_id": t} for t in "ab"]

    # when / then
    with pytest.raises(ValueError, match=r"TaskInstance rows must give id \(default per row\)"):
        model_rows_insert(TaskInstance, rows)
    assert not TaskInstance.objects.exists()


def test_task_instances_fall_back_to_referenced_tasks():
    # given: no declared task list, but an outlet reference names a task
    a, out = AssetFactory(), AssetFactory()
    dag = consumer("fallback", asset_node(a), task_ids=[])
    TaskOutletAssetReference.objects.create(asset=out, dag=dag, task_id="produce")
    emit(a)
    queue(dag, a)

    # when
    (created,) = scheduler_pass().created

    # then
    assert created.task_ids == ("produce",)


# --- cost ---------------------------------------------------------------------------------


def test_query_count_per_triggered_dag_is_constant(django_assert_num_queries):
    # given: a DAG on two assets and an alias, with many events
    a, b, x = AssetFactory(), AssetFactory(), AssetFactory()
    alias = AssetAliasFactory()
    dag = consumer(
        "costly",
        {"any": [asset_node(a), asset_node(b), {"alias": {"name": alias.name}}]},
        task_ids=[f"t{i}" for i in range(10)],
    )
    for _ in range(20):
        emit(a)
        emit(b)
        emit(x, via=alias)
    queue(dag, a)
    queue(dag, b)
    queue(dag, x)

    # when / then
    with django_assert_num_queries(13 + (connection.vendor == "postgresql")):
        # the pass, no locks:  1 the queued DAGs (their queue rows and expressions)
        #                      2 assets by key and alias → assets (one statement)
        # the DAG's transaction (here a SAVEPOINT inside the test's transaction), the same on
        # PostgreSQL and SQLite (no table lock):
        #   claim (lock) the DAG row (with its previous run's created_at), lock its queue
        #   rows, assets by key and alias → assets, unconsumed event ids, insert the run, insert its
        #   consumed events, the tasks' retries, insert its TIs, NOTIFY the workers (on
        #   PostgreSQL), delete the queue rows, RELEASE SAVEPOINT
        (created,) = scheduler_pass().created
    assert len(created.event_ids) == 60


def test_query_count_of_a_batch_does_not_grow_with_its_dags(django_assert_num_queries):
    # given: 30 ready DAGs on different assets, some all-of, one alias, one ref
    alias = AssetAliasFactory()
    dags = []
    for i in range(30):
        a, b = AssetFactory(), AssetFactory()
        activate(a)
        if i % 3 == 0:
            expression = {"all": [asset_node(a), asset_node(b)]}
        elif i == 1:
            expression = {"alias": {"name": alias.name}}
        elif i == 2:
            expression = {"asset_ref": {"uri": a.uri}}
        else:
            expression = asset_node(a)
        dag = consumer(f"batch_{i:02d}", expression, task_ids=["t"])
        emit(a, via=alias if i == 1 else None)
        emit(b)
        queue(dag, a)
        queue(dag, b)
        dags.append(dag)

    # when / then: one transaction whatever the number of DAGs (here a SAVEPOINT): lock the
    # DAGs (with their previous runs), lock their queue rows, assets by key, alias → assets
    # and active assets by ref (one statement), unconsumed events, insert the runs, their
    # events, the tasks' retries, their TIs, NOTIFY the workers (PostgreSQL), delete the queue
    # rows, RELEASE SAVEPOINT
    with django_assert_num_queries(11 + (connection.vendor == "postgresql")):
        outcomes = dags_asset_triggered_runs_create(dag_ids=[dag.dag_id for dag in dags])
    assert [o.outcome for o in outcomes] == [Outcome.CREATED] * 30
    assert DagRun.objects.count() == 30
    assert TaskInstance.objects.filter(state="scheduled", max_tries=0).count() == 30
    assert not AssetDagRunQueue.objects.exists()
    # each run consumed exactly its own DAG's events
    for dag, outcome in zip(dags, outcomes, strict=True):
        (run,) = runs_of(dag)
        assert run.pk == outcome.runs[0].dag_run_pk
        assert consumed(run) == set(outcome.runs[0].event_ids)
        assert len(outcome.runs[0].event_ids) == (2 if dag.asset_expression.get("all") else 1)


def test_a_batch_settles_each_dag_on_its_own():
    # given: a ready DAG, one not ready, a paused one, one no longer asset-scheduled, one with
    # an unreadable expression and one whose events were all consumed already
    a, b = AssetFactory(), AssetFactory()
    emit(a)
    ready = consumer("ready", asset_node(a))
    waiting = consumer("waiting", {"all": [asset_node(a), asset_node(b)]})
    paused = consumer("paused", asset_node(a), is_paused=True)
    dropped = consumer("dropped", None)
    invalid = consumer("invalid", {"nonsense": 1})
    done = consumer("done", asset_node(a))
    for dag in (ready, waiting, paused, dropped, invalid, done):
        queue(dag, a)
    assert dag_asset_triggered_run_create(dag_id="done").outcome is Outcome.CREATED
    queue(done, a)

    # when
    outcomes = dags_asset_triggered_runs_create(
        dag_ids=["ready", "waiting", "paused", "dropped", "invalid", "done", "missing"]
    )

    # then
    assert [o.outcome for o in outcomes] == [
        Outcome.CREATED,
        Outcome.NOT_READY,
        Outcome.INACTIVE,
        Outcome.DROPPED,
        Outcome.INVALID,
        Outcome.NOTHING_TO_CONSUME,
        Outcome.LOCKED,  # gone: nothing to lock
    ]
    left = set(AssetDagRunQueue.objects.values_list("target_dag_id", flat=True))
    assert left == {"waiting", "paused", "invalid"}


def test_passes_create_runs_in_batches(django_assert_num_queries):
    # given: 25 ready DAGs
    a = AssetFactory()
    emit(a)
    for i in range(25):
        queue(consumer(f"c{i:02d}", asset_node(a)), a)

    # when
    result = scheduler_pass(batch_size=10)

    # then: every DAG got a run, consuming the one event
    assert len(result.created) == 25
    assert {run.event_ids for run in result.created} == {(AssetEvent.objects.get().pk,)}


def test_a_claim_takes_the_first_dags_in_order_that_still_have_queue_rows():
    # given: five ready DAGs in a list, one of them served already (no queue rows left)
    a = AssetFactory()
    emit(a)
    for i in range(5):
        queue(consumer(f"c{i}", asset_node(a)), a)
    assert dag_asset_triggered_run_create(dag_id="c1").outcome is Outcome.CREATED
    order = ["c4", "c1", "c3", "c0", "c2", "missing"]

    # when: a transaction claims up to two of them, then another up to ten
    first = dags_asset_triggered_runs_create(dag_ids=order, limit=2)
    second = dags_asset_triggered_runs_create(dag_ids=order, limit=10)

    # then: the first two in the list's order that still had rows, then the rest; the served
    # and the missing DAG were passed over without an outcome
    assert [(o.dag_id, o.outcome) for o in first] == [
        ("c4", Outcome.CREATED),
        ("c3", Outcome.CREATED),
    ]
    assert [(o.dag_id, o.outcome) for o in second] == [
        ("c0", Outcome.CREATED),
        ("c2", Outcome.CREATED),
    ]
    assert dags_asset_triggered_runs_create(dag_ids=order, limit=10) == []
    assert DagRun.objects.count() == 5


def test_a_claim_counts_dags_it_cannot_run_against_its_limit():
    # given: a paused DAG and a DAG whose condition is not met, before a ready one
    a, b = AssetFactory(), AssetFactory()
    emit(a)
    for dag in (
        consumer("paused", asset_node(a), is_paused=True),
        consumer("waiting", {"all": [asset_node(a), asset_node(b)]}),
        consumer("ready", asset_node(a)),
    ):
        queue(dag, a)

    # when
    outcomes = dags_asset_triggered_runs_create(dag_ids=["paused", "waiting", "ready"], limit=2)

    # then: they were claimed and settled; the ready one is left for the next claim
    assert [(o.dag_id, o.outcome) for o in outcomes] == [
        ("paused", Outcome.INACTIVE),
        ("waiting", Outcome.NOT_READY),
    ]
    assert not DagRun.objects.exists()


def test_a_pass_claims_batch_after_batch_until_the_ready_list_is_done(
    django_assert_num_queries,
):
    # given: 25 ready DAGs
    a = AssetFactory()
    emit(a)
    for i in range(25):
        queue(consumer(f"c{i:02d}", asset_node(a)), a)

    # when / then: batches of 10: three claims, the last one short (so no fourth)
    with django_assert_num_queries(2 + 3 * (11 + (connection.vendor == "postgresql"))):
        # the pass: the queued DAGs, assets by key (nothing else to resolve); then per batch
        # (a SAVEPOINT here): claim (with the previous runs), lock the queue rows, assets by
        # key, unconsumed events, insert the runs, their events, the tasks' retries, their TIs,
        # NOTIFY (PostgreSQL), delete the queue rows, RELEASE SAVEPOINT
        result = scheduler_pass(batch_size=10)
    assert len(result.created) == 25


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_watch_looks_only_at_dags_with_new_queue_rows(django_assert_num_queries):
    # given: 20 all-of DAGs waiting for b, seen by a first (full) pass
    a, b, c = AssetFactory(), AssetFactory(), AssetFactory()
    emit(a)
    waiting = [consumer(f"w{i:02d}", {"all": [asset_node(a), asset_node(b)]}) for i in range(20)]
    for dag in waiting:
        queue(dag, a)
    on_c = consumer("on_c", asset_node(c))
    clock = FakeClock()
    watch = QueueWatch(clock=clock)
    assert scheduler_pass(watch=watch).count(Outcome.NOT_READY) == 20

    # when: nothing new arrives
    clock.now += 0.5
    with django_assert_num_queries(1):  # only the ids of the rows above the bound
        idle = scheduler_pass(watch=watch)

    # then: the waiting DAGs were not evaluated again
    assert idle.outcomes == []

    # when: a row for another DAG arrives
    emit(c)
    queue(on_c, c)
    clock.now += 0.5
    result = scheduler_pass(watch=watch)

    # then: only that DAG was evaluated, and run
    assert [(o.dag_id, o.outcome) for o in result.outcomes] == [("on_c", Outcome.CREATED)]


def test_watch_finds_a_row_committed_after_higher_ids_within_the_overlap():
    # given: a pass saw the queue row with id 100
    a = AssetFactory()
    emit(a)
    first, late = consumer("first", asset_node(a)), consumer("late", asset_node(a))
    AssetDagRunQueue.objects.create(pk=100, target_dag=first, asset=a)
    clock = FakeClock()
    watch = QueueWatch(clock=clock, overlap=2.0, full_rescan_every=10.0)
    assert [run.dag_id for run in scheduler_pass(watch=watch).created] == ["first"]

    # when: a producer that drew id 50 commits now, and the next pass is within the overlap
    AssetDagRunQueue.objects.create(pk=50, target_dag=late, asset=a)
    clock.now += 1.0
    result = scheduler_pass(watch=watch)

    # then: it is found
    assert [run.dag_id for run in result.created] == ["late"]


def test_watch_finds_a_row_committed_too_late_at_the_next_full_rescan():
    # given: passes moved the bound past id 50
    a = AssetFactory()
    emit(a)
    first, late = consumer("first", asset_node(a)), consumer("late", asset_node(a))
    AssetDagRunQueue.objects.create(pk=100, target_dag=first, asset=a)
    clock = FakeClock()
    watch = QueueWatch(clock=clock, overlap=2.0, full_rescan_every=10.0)
    assert [run.dag_id for run in scheduler_pass(watch=watch).created] == ["first"]
    clock.now += 3.0
    scheduler_pass(watch=watch)

    # when: a row with a lower id becomes visible after the overlap
    AssetDagRunQueue.objects.create(pk=50, target_dag=late, asset=a)
    clock.now += 3.0
    missed = scheduler_pass(watch=watch)
    clock.now += 4.0  # 10 s after the first (full) pass
    found = scheduler_pass(watch=watch)

    # then: the incremental pass misses it, the full rescan finds it
    assert missed.created == []
    assert [run.dag_id for run in found.created] == ["late"]


def test_watch_sweeps_every_waiting_dag_again_a_chunk_per_pass():
    # given: five DAGs on a ref to an asset that is not active yet, evaluated (not met)
    a = AssetFactory()
    emit(a)
    for i in range(5):
        queue(consumer(f"ref{i}", {"asset_ref": {"name": a.name}}), a)
    clock = FakeClock()
    watch = QueueWatch(clock=clock, full_rescan_every=10.0, sweep_chunk=2)
    assert scheduler_pass(watch=watch).count(Outcome.NOT_READY) == 5

    # when: the asset becomes active (no new queue row says so)
    activate(a)
    clock.now += 5.0
    before_the_sweep = scheduler_pass(watch=watch)
    clock.now += 5.0  # the sweep is due
    created = []
    for _ in range(3):
        created.append(len(scheduler_pass(watch=watch).created))
        clock.now += 0.1

    # then: not before the sweep; then two DAGs per pass
    assert before_the_sweep.outcomes == []
    assert created == [2, 2, 1]
    assert DagRun.objects.count() == 5


def test_watch_retries_ready_dags_left_for_the_next_pass():
    # given: two ready DAGs, a pass that may handle only one
    a = AssetFactory()
    emit(a)
    for dag_id in ("one", "two"):
        queue(consumer(dag_id, asset_node(a)), a)
    clock = FakeClock()
    watch = QueueWatch(clock=clock)
    (first,) = scheduler_pass(watch=watch, max_dags=1).created

    # when: no new row arrives
    clock.now += 0.5
    (second,) = scheduler_pass(watch=watch, max_dags=1).created

    # then: the other one is handled by the next pass all the same
    assert {first.dag_id, second.dag_id} == {"one", "two"}


# --- the command --------------------------------------------------------------------------


def test_command_once_prints_what_it_created(seed_consumers):
    # given
    asset, alias, by_alias, by_asset = seed_consumers
    emit(asset, via=alias)
    queue(by_alias, asset)
    queue(by_asset, asset)
    out = StringIO()

    # when
    call_command("scheduler", "--once", stdout=out)

    # then
    text = out.getvalue()
    assert "created asset_alias_example_alias_consumer asset_triggered__" in text
    assert "created asset_s3_bucket_consumer asset_triggered__" in text
    assert "1 event(s), 1 task instance(s)" in text
    assert "after 1 pass(es), 2 run(s)" in text


def test_command_max_passes():
    out = StringIO()
    call_command("scheduler", "--interval", "0", "--max-passes", "3", stdout=out)
    assert "after 3 pass(es), 0 run(s)" in out.getvalue()


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["--interval", "-1"], id="negative-interval"),
        pytest.param(["--max-passes", "0"], id="zero-passes"),
        pytest.param(["--once", "--max-dags", "0"], id="zero-dags"),
        pytest.param(["--once", "--max-dags", "-1"], id="negative-dags"),
    ],
)
def test_command_rejects_bad_arguments(args):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError):
        call_command("scheduler", *args, stdout=StringIO())


@pytest.mark.skipif(
    connection.vendor != "postgresql"
    or connection.settings_dict["OPTIONS"].get("prepare_threshold") is None,
    reason="PostgreSQL's prepared statements (DATABASE_PREPARE_THRESHOLD set)",
)
def test_the_statements_that_read_the_queue_are_planned_at_every_pass():
    # given: a consumer that gets a run at every pass, more passes than the prepare threshold
    asset = AssetFactory()
    dag = consumer("often", asset_node(asset))
    threshold = connection.settings_dict["OPTIONS"]["prepare_threshold"]
    for _ in range(threshold + 3):
        emit(asset)
        queue(dag, asset)

        # when
        assert len(scheduler_pass().created) == 1
        assert not AssetDagRunQueue.objects.exists()

    # then: the other hand-written statements of a batch are prepared, not those that read
    # the queue: a plan kept from a pass over a small queue reads all of it once it has grown
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        prepared = [statement for (statement,) in cursor.fetchall()]
    assert any("INSERT INTO dagrun_asset_event" in s for s in prepared), prepared
    assert [s for s in prepared if "asset_dag_run_queue" in s] == []
    assert len(runs_of(dag)) == threshold + 3
