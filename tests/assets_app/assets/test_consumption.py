"""What a run consumes, in its two forms held to the same cases: the set-based SQL that creates
runs (``unconsumed_event_ids``) and the ORM filter that finds the events still waiting for a
consumer (``next_run_events``, behind ``events_awaiting_consumers``). Each case is one DAG's
condition over a fixed world of assets, aliases, events and earlier runs; both forms must pick
exactly the expected events, and so must the admin's "DAGs waiting" on each event (the event
list, the overview and an event's page: ``consumers_awaiting``) and the prune's rule."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.models import Max
from django.urls import reverse
from django.utils import timezone

from assets_app.conditions import condition_parse, condition_references
from assets_app.models import (
    AssetActive,
    AssetAliasAsset,
    AssetAliasAssetEvent,
    AssetDagRunQueue,
    AssetEvent,
    Dag,
    DagRun,
    DagRunAssetEvent,
    DagRunType,
)
from assets_app.services.assets.consumption import (
    EVENT_LOOKBACK,
    QUEUED_FRESH_STEP,
    Emission,
    condition_resolve,
    consumed_by,
    consumers_queue_steps,
    events_awaiting_consumers,
    latest_asset_triggered_runs,
    next_run_events,
    resolution_restrict,
    unconsumed_event_ids,
)
from assets_app.services.sql import Dialect
from tests.factories import (
    AssetAliasFactory,
    AssetEventFactory,
    AssetFactory,
    DagFactory,
    DagRunFactory,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def world() -> dict[str, Any]:
    """Assets ``a`` (active), ``b``, ``c`` (active); alias ``x`` → ``a``, ``b``. Events:
    ``a1`` direct on a, ``a2`` on a through x, ``b1`` on b through x, ``b2`` direct on b,
    ``c1`` on c, ``p1`` partitioned on a; ``old`` on a (long ago) and ``taken`` on a (consumed
    by an earlier run of the DAG ``dag``, whose run makes the lookback apply)."""
    now = timezone.now()
    a, b, c = (AssetFactory(name=n, uri=f"s3://w/{n}") for n in "abc")
    for asset in (a, c):
        AssetActive.objects.create(asset=asset, name=asset.name, uri=asset.uri)
    x = AssetAliasFactory(name="x")
    AssetAliasAsset.objects.bulk_create(
        [AssetAliasAsset(alias=x, asset=a), AssetAliasAsset(alias=x, asset=b)]
    )
    events = {
        "old": AssetEventFactory(asset=a, timestamp=now - EVENT_LOOKBACK - timedelta(hours=2)),
        "taken": AssetEventFactory(asset=a, timestamp=now - timedelta(minutes=1)),
        "a1": AssetEventFactory(asset=a, timestamp=now),
        "a2": AssetEventFactory(asset=a, timestamp=now + timedelta(seconds=1)),
        "b1": AssetEventFactory(asset=b, timestamp=now + timedelta(seconds=2)),
        "b2": AssetEventFactory(asset=b, timestamp=now + timedelta(seconds=3)),
        "c1": AssetEventFactory(asset=c, timestamp=now + timedelta(seconds=4)),
        "p1": AssetEventFactory(asset=a, partition_key="2026-12-01"),
    }
    AssetAliasAssetEvent.objects.bulk_create(
        [
            AssetAliasAssetEvent(alias=x, event=events["a2"]),
            AssetAliasAssetEvent(alias=x, event=events["b1"]),
        ]
    )
    dag = DagFactory(dag_id="dag")
    earlier = DagRunFactory(
        dag=dag, run_type=DagRunType.ASSET_TRIGGERED, created_at=now - timedelta(minutes=5)
    )
    DagRunAssetEvent.objects.create(dag_run=earlier, event=events["taken"])
    DagFactory(dag_id="fresh")  # no earlier run: no lookback, consumes the history
    return {"events": events}


CASES = [
    # (dag, condition, expected events)
    ("dag", {"asset": {"name": "a", "uri": "s3://w/a"}}, ["a1", "a2"]),
    ("fresh", {"asset": {"name": "a", "uri": "s3://w/a"}}, ["old", "taken", "a1", "a2"]),
    ("dag", {"alias": {"name": "x"}}, ["a2", "b1"]),  # only what came through the alias
    ("dag", {"asset_ref": {"name": "c"}}, ["c1"]),
    ("dag", {"asset_ref": {"uri": "s3://w/a"}}, ["a1", "a2"]),
    ("dag", {"asset_ref": {"name": "b"}}, []),  # b is not active: the ref resolves to nothing
    ("dag", {"asset": {"name": "nope", "uri": "s3://w/nope"}}, []),
    (
        "dag",
        {"any": [{"alias": {"name": "x"}}, {"asset": {"name": "c", "uri": "s3://w/c"}}]},
        ["a2", "b1", "c1"],
    ),
    (
        "dag",
        {"all": [{"asset": {"name": "b", "uri": "s3://w/b"}}, {"alias": {"name": "x"}}]},
        ["a2", "b1", "b2"],
    ),
]


@pytest.mark.parametrize(("dag_id", "expression", "expected"), CASES)
def test_the_sql_and_orm_forms_consume_the_same_events(
    world: dict[str, Any], dag_id: str, expression: dict[str, Any], expected: list[str]
) -> None:
    events = world["events"]
    condition = condition_parse(expression)
    references = condition_references(condition)
    resolution = condition_resolve(references)
    wanted = [events[name].pk for name in expected]

    by_sql = unconsumed_event_ids(
        conditions={dag_id: condition},
        resolution=resolution,
        previous=latest_asset_triggered_runs([dag_id]),
    )
    by_orm = list(
        AssetEvent.objects.filter(
            next_run_events(
                dag_id=dag_id,
                alias_names=references.alias_names,
                resolution=resolution_restrict(resolution, references),
                previous_run_at=DagRun.objects.filter(
                    dag_id=dag_id, run_type=DagRunType.ASSET_TRIGGERED
                ).aggregate(latest=Max("created_at"))["latest"],
            )
        )
        .order_by("timestamp", "id")
        .values_list("pk", flat=True)
    )

    assert by_sql.get(dag_id, []) == wanted  # oldest first
    assert sorted(by_orm) == sorted(wanted)


@pytest.mark.parametrize(("dag_id", "expression", "expected"), CASES)
def test_the_admin_and_the_prune_see_the_same_events_waiting(
    admin_client: Any,
    world: dict[str, Any],
    dag_id: str,
    expression: dict[str, Any],
    expected: list[str],
) -> None:
    # given the case's DAG scheduled on its condition and queued (on an asset the condition
    # need not name: a queued DAG waits for what its next run consumes, wherever it was queued)
    events = world["events"]
    Dag.objects.filter(dag_id=dag_id).update(asset_expression=expression)
    AssetDagRunQueue.objects.create(asset=events["c1"].asset, target_dag_id=dag_id)
    wanted = {events[name].pk for name in expected}

    # when
    response = admin_client.get(reverse("admin:assets_app_assetevent_changelist"))
    own_pages = {
        name: admin_client.get(reverse("admin:assets_app_assetevent_change", args=[event.pk]))
        for name, event in events.items()
    }

    # then the event list shows the DAG waiting on exactly the events its next run consumes
    listed = response.context["cl"].result_list
    assert {event.pk for event in listed} == {event.pk for event in events.values()}
    assert {
        event.pk for event in listed if dag_id in {dag.dag_id for dag in event.waiting_consumers}
    } == wanted
    # and so does each event's own page
    assert {
        events[name].pk for name, page in own_pages.items() if dag_id in waiting_on_page(page)
    } == wanted
    # and the prune keeps exactly those
    awaited = AssetEvent.objects.filter(events_awaiting_consumers()).values_list("pk", flat=True)
    assert set(awaited) == wanted


def waiting_on_page(page: Any) -> set[str]:
    """The DAGs an event's page lists as waiting on it (the links of its waiting list)."""
    assert page.status_code == 200
    html = page.content.decode()
    start = html.find('class="ar-waiting-list"')
    if start < 0:
        return set()
    listed = html[start : html.index("</div>", start)]
    return set(re.findall(r'href="/admin/assets_app/dag/([^/]+)/change/"', listed))


def test_a_consumed_event_link_keeps_its_runs_dag_and_refuses_one_without():
    run = DagRunFactory()
    event = AssetEventFactory()
    link = DagRunAssetEvent.objects.create(dag_run=run, event=event)
    assert link.dag_id == run.dag_id
    assert AssetEvent.objects.filter(consumed_by(run.dag_id)).get() == event

    with pytest.raises(IntegrityError), transaction.atomic():
        DagRunAssetEvent.objects.bulk_create(
            [DagRunAssetEvent(dag_run=DagRunFactory(), event=AssetEventFactory())]
        )


# --- the queue statement's shapes -------------------------------------------------------------


def queue_text(fresh_asset_ids: set[int]) -> str:
    emissions = [Emission(asset_id=n, alias_id=7, name=f"n{n}", uri=f"s3://q/{n}") for n in (1, 2)]
    steps = consumers_queue_steps(
        Dialect.current(), emissions=emissions, now=timezone.now(), fresh_asset_ids=fresh_asset_ids
    )
    assert steps is not None
    return steps.statement().text


def test_queue_statement_without_new_assets_is_the_upsert_alone():
    assert queue_text(set()) == queue_text({99})  # an id no emission is on
    assert queue_text(set()).count("ON CONFLICT") == 1
    assert "fresh" not in queue_text(set())


@pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite: the upsert alone")
def test_queue_statement_of_new_assets_inserts_them_plainly():
    # only new assets: the plain insert alone, no marks, no filter
    only_new = queue_text({1, 2})
    assert "ON CONFLICT" not in only_new
    assert "fresh" not in only_new.replace(QUEUED_FRESH_STEP, "")
    # both kinds: rows marked, each insert takes its own from the consumers read once
    both = queue_text({2})
    assert both.count("ON CONFLICT") == 1
    assert "c.fresh IS NULL AND" in both
    assert "c.fresh AND" in both


@pytest.mark.skipif(
    connection.vendor == "postgresql", reason="PostgreSQL inserts the rows of new assets plainly"
)
def test_queue_statement_on_sqlite_ignores_new_assets():
    assert queue_text({1, 2}) == queue_text(set())
