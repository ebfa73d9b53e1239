"""The overview (admin index), the asset page and the DAG page: counts, charts, lineage and
recent rows, each node and bar a link, in a constant number of queries."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from assets_app.admin.common import WaitingDag
from assets_app.admin.panels import asset_lineage, dag_lineage, overview
from assets_app.models import (
    AssetAliasAssetEvent,
    AssetDagRunQueue,
    AssetEvent,
    Dag,
    DagRun,
    DagRunAssetEvent,
    TaskInstance,
)
from assets_app.services.assets.consumption import EVENT_LOOKBACK
from tests.assets_app.admin import change, changelist, query_count
from tests.factories import DagRunFactory, TaskInstanceFactory

pytestmark = pytest.mark.django_db

INDEX = reverse("admin:index")


def _hrefs(html: str) -> set[str]:
    return {href.replace("&amp;", "&") for href in re.findall(r'href="([^"]+)"', html)}


def _more_events(world, count: int, *, hours_apart: float = 0.5) -> None:
    """``count`` events on the world's asset, half an hour apart, each through the alias and
    consumed by a run of its own."""
    now = timezone.now()
    asset, alias = world["asset"], world["assetalias"]
    events = AssetEvent.objects.bulk_create(
        AssetEvent(
            asset=asset,
            source_dag_id="asset_s3_bucket_producer",
            source_task_id="produce_asset_events",
            source_run_id=f"scheduled__{i}",
            timestamp=now - timedelta(hours=hours_apart * (i + 1)),
        )
        for i in range(count)
    )
    start = DagRun.objects.count()
    runs = DagRun.objects.bulk_create(
        DagRun(dag_id="asset_s3_bucket_consumer", run_id=f"asset_triggered__{start + i}")
        for i in range(count)
    )
    AssetAliasAssetEvent.objects.bulk_create(
        AssetAliasAssetEvent(alias=alias, event=event) for event in events
    )
    DagRunAssetEvent.objects.bulk_create(
        DagRunAssetEvent(dag_run=run, event=event, dag_id=run.dag_id)
        for run, event in zip(runs, events, strict=True)
    )


# --- the overview ------------------------------------------------------------------------------


def test_overview_counts(world):
    # given: one running and one failed task instance besides the world's
    TaskInstanceFactory(dag_run=DagRunFactory(), task_id="t", state="running")
    TaskInstanceFactory(dag_run=DagRunFactory(), task_id="t", state="failed")
    AssetEvent.objects.filter(pk=world["orphan"].pk).update(
        timestamp=timezone.now() - timedelta(days=3)
    )

    # when
    ov = overview()

    # then
    assert (ov.assets_active, ov.assets_inactive) == (1, 0)
    assert (ov.events_24h, ov.events_7d) == (1, 2)
    assert (ov.queue_entries, ov.queue_dags) == (1, 1)
    assert timedelta(minutes=5) <= ov.oldest_wait < timedelta(minutes=6)
    assert ov.runs_by_state["queued"] == DagRun.objects.filter(state="queued").count()
    assert (ov.tis_running, ov.tis_failed) == (1, 1)
    assert [row.event for row in ov.latest] == list(AssetEvent.objects.order_by("-timestamp"))


def test_overview_page_links_counts_chart_and_latest_events(admin_client, world):
    # when
    html = admin_client.get(INDEX).content.decode()

    # then: the counts link to their lists, the chart is inline SVG without a script
    links = _hrefs(html)
    assert f"{changelist('asset')}?active=yes" in links
    assert f"{changelist('dagrun')}?state__exact=failed" in links
    assert f"{changelist('taskinstance')}?state__exact=running" in links
    assert changelist("assetdagrunqueue") in links
    chart = html[html.index('<figure class="ar-chart"') :]
    chart = chart[: chart.index("</figure>")]
    assert chart.count('class="rect reactive tooltip-trigger"') == 48  # one bar per hour
    assert "<script" not in chart
    assert not re.search(r"(src|href)=\"(https?:)?//", html), "nothing from another host"
    hour_links = [link for link in _hrefs(chart) if "timestamp__gte" in link]
    assert len(hour_links) == 48
    # the latest event: producer (DAG, task, run) → asset → consumer run
    event, producer_run = world["assetevent"], world["taskinstance"].dag_run
    for url in (
        change("dag", event.source_dag_id),
        f"{changelist('taskinstance')}?dag_id={event.source_dag_id}&task_id={event.source_task_id}",
        change("dagrun", producer_run.pk),
        change("asset", event.asset_id),
        change("assetalias", world["assetalias"].pk),
        change("dagrun", world["dagrun"].pk),
        change("assetevent", event.pk),
    ):
        assert url in links, url


def test_overview_hour_bar_lists_its_events(admin_client, world):
    html = admin_client.get(INDEX).content.decode()
    chart = html[html.index('<figure class="ar-chart"') :]
    last_hour = sorted(link for link in _hrefs(chart) if "timestamp__gte" in link)[-1]
    response = admin_client.get(last_hour)
    assert response.status_code == 200
    assert {e.pk for e in response.context["cl"].result_list} >= {world["assetevent"].pk}


def test_overview_marks_consumers_waiting_on_the_newest_event(world):
    # given: the queued consumer waits since before the world's event
    rows = overview().latest
    newest = next(row for row in rows if row.event == world["assetevent"])

    # then
    assert newest.waiting_dags == [WaitingDag("asset_s3_bucket_consumer", is_paused=False)]
    assert newest.consumer_runs == [world["dagrun"]]


def _newest_waiting(world) -> list[WaitingDag]:
    return next(row for row in overview().latest if row.event == world["assetevent"]).waiting_dags


def test_a_paused_queued_consumer_still_waits(world):
    Dag.objects.filter(dag_id="asset_s3_bucket_consumer").update(is_paused=True)
    assert _newest_waiting(world) == [WaitingDag("asset_s3_bucket_consumer", is_paused=True)]


def test_a_queued_consumer_whose_schedule_cannot_be_read_waits_on_its_queued_assets(world):
    Dag.objects.filter(dag_id="asset_s3_bucket_consumer").update(asset_expression={"dataset": 1})
    assert _newest_waiting(world) == [WaitingDag("asset_s3_bucket_consumer", is_paused=False)]


def test_an_event_the_queued_consumer_consumed_is_not_waited_on(world):
    # given: an earlier run of the queued consumer consumed the event
    run = DagRunFactory(dag_id="asset_s3_bucket_consumer", run_type="asset_triggered")
    DagRunAssetEvent.objects.create(dag_run=run, event=world["assetevent"])

    # then
    assert _newest_waiting(world) == []


def test_an_event_before_the_latest_runs_lookback_is_not_waited_on(world):
    # given: the queued consumer's latest asset-triggered run came after the event's lookback
    # (its next run looks back EVENT_LOOKBACK from there: the event is never consumed)
    DagRunFactory(
        dag_id="asset_s3_bucket_consumer",
        run_type="asset_triggered",
        created_at=world["assetevent"].timestamp + EVENT_LOOKBACK + timedelta(seconds=1),
    )

    # then
    assert _newest_waiting(world) == []


def test_the_queue_rows_age_does_not_decide_the_wait(world):
    # given: the consumer queued after the event (by a later event on another of its assets,
    # say): its next run still consumes the event
    AssetDagRunQueue.objects.update(created_at=timezone.now() + timedelta(seconds=1))

    # then
    assert _newest_waiting(world) == [WaitingDag("asset_s3_bucket_consumer", is_paused=False)]


@pytest.mark.parametrize(
    "url",
    [
        pytest.param(lambda world: INDEX, id="overview"),
        pytest.param(lambda world: change("asset", world["asset"].pk), id="asset"),
        pytest.param(lambda world: change("dag", "asset_s3_bucket_consumer"), id="dag"),
    ],
)
def test_page_query_count_is_flat_from_10_to_1000_events(admin_client, world, url):
    # given
    _more_events(world, 10)
    page = url(world)
    admin_client.get(page)  # warm caches (content types, session)
    few = query_count(admin_client, page)

    # when
    _more_events(world, 990, hours_apart=0.02)
    many = query_count(admin_client, page)

    # then
    assert many == few


# --- the asset page ----------------------------------------------------------------------------


def test_asset_lineage_producers_aliases_consumers_and_who_waits(world):
    lineage = asset_lineage(world["asset"])
    nodes = lineage.nodes
    assert nodes["asset"].focus
    producer = nodes["task:asset_s3_bucket_producer.produce_asset_events"]
    alias = nodes[f"alias:{world['assetalias'].pk}"]
    waiting = nodes["dag:asset_s3_bucket_consumer"]
    via_alias = nodes["dag:asset_alias_example_alias_consumer"]
    assert (producer.key, "asset") in lineage.edges
    assert (alias.key, "asset") in lineage.edges
    assert ("asset", waiting.key) in lineage.edges
    assert ("asset", via_alias.key) in lineage.edges
    assert waiting.waiting
    assert waiting.note == "waiting on this asset"
    assert not via_alias.waiting
    assert via_alias.note == "through alias example-alias"
    assert producer.url == (
        f"{changelist('taskinstance')}?dag_id=asset_s3_bucket_producer&task_id=produce_asset_events"
    )


def test_asset_page_shows_chart_lineage_and_latest_events(admin_client, world):
    html = admin_client.get(change("asset", world["asset"].pk)).content.decode()
    lineage = html[html.index('<svg class="ar-lineage ar-flow-') :]
    lineage = lineage[: lineage.index("</svg>")]
    links = _hrefs(lineage)
    assert change("dag", "asset_s3_bucket_consumer") in links
    assert change("dag", "asset_alias_example_alias_consumer") in links
    assert change("assetalias", world["assetalias"].pk) in links
    assert "ar-waiting" in lineage
    chart = html[html.index('<figure class="ar-chart"') :]
    assert chart.count('class="rect reactive tooltip-trigger"') >= 30
    day_links = [link for link in _hrefs(chart[: chart.index("</figure>")]) if "timestamp" in link]
    assert len(day_links) == 30
    assert all(f"asset__id__exact={world['asset'].pk}" in link for link in day_links)
    events = html[html.index('id="ar-asset-events"') :]
    assert change("dagrun", world["dagrun"].pk) in _hrefs(events)
    assert change("dagrun", world["taskinstance"].dag_run_id) in _hrefs(events)


# --- the DAG page ------------------------------------------------------------------------------


def test_dag_lineage_inputs_dag_tasks_outputs(world):
    consumer = dag_lineage(world["dag"])
    assert consumer.nodes["dag"].focus
    queued = consumer.nodes[f"in:{world['asset'].pk}"]
    assert queued.waiting
    assert queued.note == "event queued"
    assert (queued.key, "dag") in consumer.edges

    producer = dag_lineage(Dag.objects.get(pk="asset_s3_bucket_producer"))
    task = "task:produce_asset_events"
    assert ("dag", task) in producer.edges
    assert (task, f"out:{world['asset'].pk}") in producer.edges
    alias_consumer = dag_lineage(world["scheduled_dag"])
    assert (f"alias:{world['assetalias'].pk}", "dag") in alias_consumer.edges


def test_dag_page_shows_lineage_and_recent_runs_with_state_and_duration(admin_client, world):
    run = world["dagrun"]
    DagRun.objects.filter(pk=run.pk).update(
        state="success",
        start_date=timezone.now() - timedelta(minutes=3, seconds=4),
        end_date=timezone.now(),
    )
    html = admin_client.get(change("dag", run.dag_id)).content.decode()
    assert '<svg class="ar-lineage ar-flow-' in html
    runs = html[html.index('id="ar-dag-runs"') :]
    assert change("dagrun", run.pk) in _hrefs(runs)
    assert "success" in runs
    assert "3 m 4 s" in runs


def test_task_instances_unchanged_by_rendering(admin_client, world):
    before = TaskInstance.objects.count()
    admin_client.get(INDEX)
    assert TaskInstance.objects.count() == before
