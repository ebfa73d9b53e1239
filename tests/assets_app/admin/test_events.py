"""assets_app.admin.events: asset events and the alias → event links."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from assets_app.models import (
    AssetAliasAssetEvent,
    AssetDagRunQueue,
    AssetEvent,
    DagRunAssetEvent,
)
from tests.assets_app.admin import (
    assert_query_count_does_not_grow,
    change,
    changelist,
    listed,
    page_text,
)
from tests.factories import (
    AssetAliasFactory,
    AssetEventFactory,
    AssetFactory,
    DagFactory,
    DagRunFactory,
)

pytestmark = pytest.mark.django_db


def test_asset_event_page_shows_sources_aliases_consumers_and_pretty_extra(admin_client, world):
    # when
    content = page_text(admin_client, change("assetevent", world["assetevent"].pk))

    # then
    assert "asset_alias_example_alias_producer" in content
    assert "produce_asset_events_through_asset_alias" in content
    assert "manual__1" in content
    assert "example-alias" in content
    assert "asset_triggered__1" in content  # the run the event triggered
    assert "&quot;nested&quot;: {\n" in content  # extra is pretty-printed


def test_event_of_a_deleted_asset_renders(admin_client, world):
    # given
    orphan = world["orphan"]

    # when
    listing = admin_client.get(changelist("assetevent")).content.decode()
    page = admin_client.get(change("assetevent", orphan.pk))

    # then
    assert f"deleted asset #{orphan.asset_id}" in listing
    assert page.status_code == 200
    assert f"deleted asset #{orphan.asset_id}" in page.content.decode()


@pytest.mark.parametrize(
    ("model", "params", "expected"),
    [
        pytest.param("assetevent", {"q": "my-task"}, ["assetevent"], id="event-search"),
        pytest.param(
            "assetevent",
            {"source_dag": "asset_alias_example_alias_producer"},
            ["assetevent"],
            id="event-source-dag",
        ),
        pytest.param("assetevent", {"source": "manual"}, [], id="event-manual"),
        pytest.param("assetevent", {"source": "task"}, ["assetevent", "orphan"], id="event-task"),
        pytest.param("assetevent", {"q": "nothing-matches"}, [], id="no-match"),
        pytest.param(
            "assetaliasassetevent",
            {"q": "my-task"},
            ["assetaliasassetevent"],
            id="alias-event-search",
        ),
    ],
)
def test_search_and_filters(admin_client, world, model, params, expected):
    assert listed(admin_client, model, params) == {world[name].pk for name in expected}


def test_event_filters_by_time_and_alias(admin_client, world):
    alias_id = world["assetalias"].pk
    since = (timezone.now() - timedelta(days=1)).isoformat()
    response = admin_client.get(
        changelist("assetevent"), {"source_alias": alias_id, "timestamp__gte": since}
    )
    assert response.status_code == 200
    assert list(response.context["cl"].result_list) == [world["assetevent"]]


def _search_world() -> None:
    """Events whose asset names, uris, DAG ids and run ids overlap in case and substrings."""
    orders = AssetFactory(name="Orders", uri="s3://Lake/orders")
    customers = AssetFactory(name="customers", uri="s3://lake/CUSTOMERS")
    gone = AssetFactory(name="gone-orders", uri="s3://lake/gone")
    AssetEventFactory(asset=orders, source_dag_id="ETL", source_run_id="manual__1")
    AssetEventFactory(asset=orders, source_dag_id="load", source_run_id="ORDERS")
    AssetEventFactory(asset=customers, source_dag_id="etl", source_run_id="run_2")
    AssetEventFactory(asset=customers, source_dag_id=None, source_task_id=None, source_run_id=None)
    AssetEventFactory(asset=gone, source_dag_id="lake", source_run_id="x")
    gone.delete()  # its event stays, with a dangling asset_id


@pytest.mark.parametrize("max_asset_ids", [1000, 1], ids=["id-list", "subquery"])
@pytest.mark.parametrize(
    "term",
    [
        "orders",
        "ORDERS",
        "etl",
        "Etl",
        "lake",
        "s3://lake",
        "manual__1",
        "manual",
        "orders etl",
        '"s3://lake/orders"',
        "customers run_2",
        "gone",
        "nothing",
        "  ",
    ],
)
def test_event_search_matches_what_search_fields_would(
    admin_client, monkeypatch, term, max_asset_ids
):
    from django.contrib import admin as django_admin
    from django.contrib.admin import ModelAdmin
    from django.test import RequestFactory

    from assets_app.selectors import assets as selectors

    # given
    _search_world()
    monkeypatch.setattr(selectors, "SEARCH_MAX_ASSET_IDS", max_asset_ids)
    model_admin = django_admin.site._registry[AssetEvent]
    request = RequestFactory().get("/")
    events = AssetEvent.objects.all()

    # when
    found, duplicates = model_admin.get_search_results(request, events, term)
    expected, _ = ModelAdmin.get_search_results(model_admin, request, events, term)

    # then the indexed search finds exactly what Django's search over search_fields finds
    assert duplicates is False
    assert sorted(found.values_list("pk", flat=True)) == sorted(
        expected.values_list("pk", flat=True)
    )


def test_event_search_through_the_changelist(admin_client):
    # given
    _search_world()

    # when
    response = admin_client.get(changelist("assetevent"), {"q": "etl"})

    # then
    assert response.status_code == 200
    assert {event.source_dag_id for event in response.context["cl"].result_list} == {"ETL", "etl"}


def test_event_source_alias_filter_lists_an_event_once(admin_client):
    # given an event emitted through two aliases, and one through neither
    first, second = AssetAliasFactory(), AssetAliasFactory()
    event = AssetEventFactory()
    AssetEventFactory()
    AssetAliasAssetEvent.objects.create(alias=first, event=event)
    AssetAliasAssetEvent.objects.create(alias=second, event=event)

    # when
    response = admin_client.get(changelist("assetevent"), {"source_alias": first.pk})

    # then
    assert response.status_code == 200
    assert list(response.context["cl"].result_list) == [event]


def test_events_link_from_asset_filters_the_event_list(admin_client, world):
    response = admin_client.get(changelist("assetevent"), {"asset__id__exact": world["asset"].pk})
    assert list(response.context["cl"].result_list) == [world["assetevent"]]


# --- query counts ----------------------------------------------------------------------------


def _events_with_links(count: int) -> None:
    alias = AssetAliasFactory()
    run = DagRunFactory()
    for _ in range(count):
        event = AssetEventFactory()
        AssetAliasAssetEvent.objects.create(alias=alias, event=event)
        DagRunAssetEvent.objects.create(dag_run=run, event=event)


def test_event_changelist_query_count_does_not_grow_with_rows(admin_client):
    queries = assert_query_count_does_not_grow(admin_client, "assetevent", _events_with_links)

    # session, user, the DAG and alias filter choices, the capped count, the page, the
    # page's source aliases and created DAG runs (prefetched), the date hierarchy's MIN/MAX
    # and the consumers still waiting on the page's events (one query: no DAG is queued)
    assert queries == 10


def test_event_changelist_with_queued_consumers_costs_two_queries_more(admin_client):
    # given events on an asset that more and more queued DAGs are scheduled on
    asset = AssetFactory()

    def queued_consumers_and_events(count: int) -> None:
        for _ in range(count):
            dag = DagFactory(asset_expression={"asset": {"name": asset.name, "uri": asset.uri}})
            AssetDagRunQueue.objects.create(asset=asset, target_dag=dag)
            AssetEventFactory(asset=asset)

    # when
    queries = assert_query_count_does_not_grow(
        admin_client, "assetevent", queued_consumers_and_events
    )

    # then as without queued DAGs, the consumers still waiting being the queued DAGs (with
    # their latest runs), their assets' ids and the page's events asked about every DAG at once
    assert queries == 10 + 2
    response = admin_client.get(changelist("assetevent"))
    assert {len(event.waiting_consumers) for event in response.context["cl"].result_list} == {100}


def test_alias_event_changelist_query_count_does_not_grow_with_rows(admin_client):
    assert_query_count_does_not_grow(admin_client, "assetaliasassetevent", _events_with_links)


def test_event_search_costs_one_query_per_word(admin_client):
    # given
    _events_with_links(10)
    url = changelist("assetevent")
    admin_client.get(url)

    # when
    with CaptureQueriesContext(connection) as plain:
        admin_client.get(url)
    with CaptureQueriesContext(connection) as searched:
        admin_client.get(url, {"q": "asset dag"})

    # then the asset lookups are the only extra queries
    assert len(searched) == len(plain) + 2


def test_event_changelist_never_counts_the_whole_table(admin_client, settings):
    # given
    _events_with_links(5)

    # when
    with CaptureQueriesContext(connection) as queries:
        admin_client.get(changelist("assetevent"))

    # then every COUNT on asset_event is bounded by a LIMIT
    counts = [q["sql"] for q in queries if "COUNT(" in q["sql"] and '"asset_event"' in q["sql"]]
    assert counts
    assert all("LIMIT" in sql for sql in counts)
