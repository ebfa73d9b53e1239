"""GET /execution/assets/by-name, /by-uri and /execution/asset-events/by-asset, /by-asset-alias."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from assets_app.models import Asset, AssetActive, AssetEvent, DagRun, DagRunAssetEvent
from executionapi import selectors
from tests.executionapi.conftest import ASSET_EVENT_ITEM_KEYS, client_for, wire_sample
from tests.factories import (
    AssetAliasFactory,
    AssetEventFactory,
    AssetFactory,
    DagFactory,
    DagRunFactory,
)

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def client(make_ti):
    return client_for(make_ti())


@pytest.fixture
def active_asset():
    asset = AssetFactory(
        name="by_name_asset", uri="s3://bucket/by-name", group="asset", extra={"ref": "name"}
    )
    AssetActive.objects.create(asset=asset, name=asset.name, uri=asset.uri)
    return asset


def test_asset_by_name_and_by_uri(client, active_asset):
    by_name = client.get("/execution/assets/by-name", {"name": "by_name_asset"})
    by_uri = client.get("/execution/assets/by-uri", {"uri": "s3://bucket/by-name"})

    assert by_name.status_code == by_uri.status_code == 200
    assert by_name.json() == by_uri.json() == wire_sample("asset_by_name_response")


def test_inactive_or_unknown_asset_is_404(client):
    AssetFactory(name="inactive", uri="s3://inactive")

    response = client.get("/execution/assets/by-name", {"name": "inactive"})

    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert response.json()["detail"]["reason"] == "not_found"


def test_asset_by_name_without_name_is_422(client):
    response = client.get("/execution/assets/by-name")

    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["query", "name"]


@pytest.fixture
def timeline(active_asset):
    events = []
    for minutes in (0, 10, 20, 30):
        event = AssetEventFactory(asset=active_asset, extra={"m": minutes})
        AssetEvent.objects.filter(pk=event.pk).update(timestamp=T0 + timedelta(minutes=minutes))
        events.append(event)
    AssetEventFactory(asset=AssetFactory(name="other", uri="s3://other"))
    return events


def _minutes(response) -> list[int]:
    assert response.status_code == 200, response.content
    return [item["extra"]["m"] for item in response.json()["asset_events"]]


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        pytest.param({"name": "by_name_asset"}, [0, 10, 20, 30], id="name-only"),
        pytest.param({"uri": "s3://bucket/by-name"}, [0, 10, 20, 30], id="uri-only"),
        pytest.param(
            {"name": "by_name_asset", "uri": "s3://bucket/by-name"}, [0, 10, 20, 30], id="both"
        ),
        pytest.param(
            {
                "name": "by_name_asset",
                "after": (T0 + timedelta(minutes=10)).isoformat(),
                "before": (T0 + timedelta(minutes=20)).isoformat(),
            },
            [10, 20],
            id="after-before-inclusive",
        ),
        pytest.param({"name": "by_name_asset", "ascending": "false"}, [30, 20, 10, 0], id="desc"),
        pytest.param({"name": "by_name_asset", "limit": 2}, [0, 10], id="limit"),
        pytest.param(
            {"name": "by_name_asset", "ascending": "false", "limit": 1}, [30], id="latest"
        ),
        pytest.param({"name": "", "uri": "s3://bucket/by-name"}, [0, 10, 20, 30], id="empty-name"),
    ],
)
def test_asset_events_by_asset_filters(client, timeline, params, expected):
    assert _minutes(client.get("/execution/asset-events/by-asset", params)) == expected


def test_asset_events_by_asset_item_shape(client, timeline):
    item = client.get("/execution/asset-events/by-asset", {"name": "by_name_asset"}).json()[
        "asset_events"
    ][0]

    assert set(item) == ASSET_EVENT_ITEM_KEYS
    assert item["asset"] == wire_sample("asset_by_name_response")
    assert item["timestamp"] == "2026-01-01T00:00:00Z"


def test_asset_events_by_asset_needs_name_or_uri(client):
    response = client.get("/execution/asset-events/by-asset")

    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    assert response.json()["detail"]["reason"] == "missing_parameter"


def test_asset_events_by_asset_naive_after_is_422(client, timeline):
    response = client.get(
        "/execution/asset-events/by-asset", {"name": "by_name_asset", "after": "2026-01-01T00:00"}
    )

    assert response.status_code == 422


def test_asset_events_with_one_key_need_an_active_asset(client):
    AssetEventFactory(asset=AssetFactory(name="gone", uri="s3://gone"))

    response = client.get("/execution/asset-events/by-asset", {"name": "gone"})

    assert _minutes(response) == []


def test_asset_events_by_asset_alias(client, timeline):
    alias = AssetAliasFactory(name="al")
    for event in timeline[1:3]:
        event.source_aliases.add(alias)

    response = client.get(
        "/execution/asset-events/by-asset-alias", {"name": "al", "ascending": "false"}
    )

    assert _minutes(response) == [20, 10]


def test_asset_events_list_the_runs_that_consumed_them(client, timeline):
    # given one event consumed by a started run and by a run not started yet
    dag = DagFactory(dag_id="consumer")
    started = DagRun.objects.create(
        dag=dag, run_id="started", logical_date=T0, start_date=T0 + timedelta(seconds=1)
    )
    waiting = DagRun.objects.create(dag=dag, run_id="waiting", created_at=T0 + timedelta(hours=1))
    for run in (started, waiting):
        DagRunAssetEvent.objects.create(dag_run=run, event=timeline[0])

    # when
    response = client.get("/execution/asset-events/by-asset", {"name": "by_name_asset"})

    # then the real client's required start_date is there: when the run was created, until
    # it starts
    assert response.json()["asset_events"][0]["created_dagruns"] == [
        {
            "run_id": "started",
            "dag_id": "consumer",
            "logical_date": "2026-01-01T00:00:00Z",
            "start_date": "2026-01-01T00:00:01Z",
            "end_date": None,
            "state": "queued",
            "data_interval_start": None,
            "data_interval_end": None,
            "partition_key": None,
        },
        {
            "run_id": "waiting",
            "dag_id": "consumer",
            "logical_date": None,
            "start_date": "2026-01-01T01:00:00Z",
            "end_date": None,
            "state": "queued",
            "data_interval_start": None,
            "data_interval_end": None,
            "partition_key": None,
        },
    ]


def test_an_event_of_a_deleted_asset_lists_a_null_asset(client):
    # given an event emitted through an alias, then its asset deleted (events survive it)
    event = AssetEventFactory(asset=AssetFactory(name="doomed", uri="s3://doomed"))
    event.source_aliases.add(AssetAliasFactory(name="al"))
    Asset.objects.filter(name="doomed").delete()

    # when
    response = client.get("/execution/asset-events/by-asset-alias", {"name": "al"})

    # then
    [item] = response.json()["asset_events"]
    assert (item["id"], item["asset"]) == (event.pk, None)


@pytest.mark.parametrize(
    ("params", "queries"),
    [
        # the events with their asset, the runs that consumed them
        pytest.param({"name": "by_name_asset", "uri": "s3://bucket/by-name"}, 2, id="both"),
        # the active asset's key first
        pytest.param({"name": "by_name_asset"}, 3, id="name-only"),
        pytest.param({"uri": "s3://bucket/by-name"}, 3, id="uri-only"),
    ],
)
def test_asset_events_query_count_is_flat(
    client, active_asset, django_assert_num_queries, params, queries
):
    for count in (1, 20):
        # given events, each consumed by two runs
        for _ in range(count):
            event = AssetEventFactory(asset=active_asset)
            for _ in range(2):
                DagRunAssetEvent.objects.create(dag_run=DagRunFactory(), event=event)

        # when / then
        with django_assert_num_queries(queries):
            response = client.get("/execution/asset-events/by-asset", params)
        assert response.status_code == 200


def test_asset_events_by_alias_query_count_is_flat(client, active_asset, django_assert_num_queries):
    alias = AssetAliasFactory(name="al")
    for count in (1, 20):
        for _ in range(count):
            event = AssetEventFactory(asset=active_asset)
            event.source_aliases.add(alias)
            DagRunAssetEvent.objects.create(dag_run=DagRunFactory(), event=event)

        # the events joined to the alias and their asset, the runs that consumed them
        with django_assert_num_queries(2):
            response = client.get("/execution/asset-events/by-asset-alias", {"name": "al"})
        assert response.status_code == 200


@pytest.mark.parametrize("count", [4, 5])
@pytest.mark.parametrize("route", ["by-asset", "by-asset-alias"])
def test_more_events_than_a_page_are_streamed_a_page_at_a_time(
    client, active_asset, monkeypatch, django_assert_num_queries, count, route
):
    # given pages of 2 events, and 4 or 5 events (the last page full or short)
    monkeypatch.setattr(selectors, "ASSET_EVENTS_PAGE", 2)
    alias = AssetAliasFactory(name="al")
    for minute in range(count):
        event = AssetEventFactory(asset=active_asset, extra={"m": minute})
        AssetEvent.objects.filter(pk=event.pk).update(timestamp=T0 + timedelta(minutes=minute))
        event.source_aliases.add(alias)
        DagRunAssetEvent.objects.create(dag_run=DagRunFactory(), event=event)
    params = {"name": "al"} if route == "by-asset-alias" else {"name": "by_name_asset"}
    whole = client.get(f"/execution/asset-events/{route}", {**params, "limit": 1}).json()

    # when: the events once, then the consumed runs of each page
    pages = -(-count // 2)
    queries = (1 if route == "by-asset" else 0) + 1 + pages
    with django_assert_num_queries(queries):
        response = client.get(f"/execution/asset-events/{route}", params)
        body = b"".join(response.streaming_content)

    # then
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    events = json.loads(body)["asset_events"]
    assert [item["extra"]["m"] for item in events] == list(range(count))
    assert events[0] == whole["asset_events"][0]  # items as a whole answer renders them
    assert all(len(item["created_dagruns"]) == 1 for item in events)


def test_a_page_or_less_is_answered_whole(client, active_asset, monkeypatch):
    monkeypatch.setattr(selectors, "ASSET_EVENTS_PAGE", 2)
    AssetEventFactory(asset=active_asset)

    response = client.get("/execution/asset-events/by-asset", {"name": "by_name_asset"})

    assert not response.streaming
    assert len(response.json()["asset_events"]) == 1
