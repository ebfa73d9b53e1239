"""``inlet_events`` and ``triggering_asset_events``: what a consumer task reads.

The accessors run in-process against the real HTTP client and the fake execution API (which
filters and orders ``/asset-events`` as the server does), so every test also pins the requests
made; the last tests run a consumer task in a real task process under the supervisor.
"""

import dataclasses
import json
from datetime import UTC, datetime, timedelta, timezone

import pytest
from sdk_helpers import TI_ID, FakeExecutionAPI, make_client, stored_event, task_ref

from task_sdk import (
    Asset,
    AssetAlias,
    AssetAliasUniqueKey,
    AssetEvent,
    AssetUniqueKey,
    TriggeringAssetEventsAccessor,
)
from task_sdk.inlets import AssetEventsQuery, InletEventsAccessors
from task_sdk.supervisor import Supervisor

ORDERS = Asset("orders", "s3://bucket/orders")
OTHER = Asset("other", "s3://bucket/other")
ALIAS = AssetAlias("my_alias")

EVENTS = [
    stored_event(1, "2026-01-01T00:00:00Z", aliases=("my_alias",)),
    stored_event(2, "2026-01-02T00:00:00Z"),
    stored_event(3, "2026-01-03T00:00:00Z", extra={"rows": 3}),
    stored_event(4, "2026-01-02T12:00:00Z", name="other", uri="s3://bucket/other"),
]


@pytest.fixture
def api():
    return FakeExecutionAPI(asset_events=[dict(e) for e in EVENTS])


@pytest.fixture
def inlet_events(api):
    """``inlet_events`` for a task declaring ORDERS, the alias and a reference by uri."""
    resolved = []

    def resolve(ref):
        resolved.append(ref)
        return AssetUniqueKey(name="other", uri="s3://bucket/other"), {}

    with make_client(api) as client:

        def fetch(query: AssetEventsQuery):
            return client.asset_events(**dataclasses.asdict(query))

        accessors = InletEventsAccessors(
            [ORDERS, ALIAS, Asset.ref(uri="s3://bucket/other")], fetch=fetch, resolver=resolve
        )
        accessors.resolved = resolved
        yield accessors


def test_len_iteration_indexing_and_slices_fetch_the_history_once(inlet_events, api):
    events = inlet_events[ORDERS]
    assert api.event_queries() == []  # lazy: nothing fetched yet

    assert len(events) == 3
    assert [e.id for e in events] == [1, 2, 3]  # oldest first
    assert [e.id for e in events[1:]] == [2, 3]
    assert events[0].id == 1
    assert events[-1].extra == {"rows": 3}
    assert next(reversed(events)).id == 3

    assert api.event_queries() == [
        ("by-asset", {"name": "orders", "uri": "s3://bucket/orders", "ascending": "true"})
    ]


def test_the_newest_event_alone_is_one_small_request(inlet_events, api):
    newest = inlet_events[ORDERS][-1]
    second_newest = inlet_events[ORDERS][-2]

    assert (newest.id, second_newest.id) == (3, 2)
    assert api.event_queries() == [
        (
            "by-asset",
            {"name": "orders", "uri": "s3://bucket/orders", "ascending": "false", "limit": "1"},
        ),
        (
            "by-asset",
            {"name": "orders", "uri": "s3://bucket/orders", "ascending": "false", "limit": "2"},
        ),
    ]


def test_a_first_index_asks_for_that_many(inlet_events, api):
    events = inlet_events[ORDERS]
    assert events[1].id == 2
    assert events[0].id == 1  # already fetched
    assert api.event_queries() == [
        (
            "by-asset",
            {"name": "orders", "uri": "s3://bucket/orders", "ascending": "true", "limit": "2"},
        )
    ]


def test_an_index_out_of_range_is_an_index_error(inlet_events, api):
    events = inlet_events[ORDERS]
    with pytest.raises(IndexError):
        events[-4]
    # fewer than asked for came back: that is the whole history, no second request
    assert len(events) == 3
    with pytest.raises(IndexError):
        events[3]
    assert len(api.event_queries()) == 1


def test_truthiness_asks_for_one_event(inlet_events, api):
    assert inlet_events[ORDERS]
    assert api.event_queries()[-1][1]["limit"] == "1"
    api.asset_events.clear()
    assert not inlet_events[ORDERS]


def test_narrowing_the_query(inlet_events, api):
    newest_first = inlet_events[ORDERS].ascending(False)
    assert [e.id for e in newest_first] == [3, 2, 1]
    assert newest_first[-1].id == 1  # cached

    oldest = inlet_events[ORDERS].ascending(False)[-1]  # the end of newest-first: the oldest
    assert oldest.id == 1
    assert api.event_queries()[-1][1] == {
        "name": "orders",
        "uri": "s3://bucket/orders",
        "ascending": "true",
        "limit": "1",
    }

    window = (
        inlet_events[ORDERS]
        .after("2026-01-02T00:00:00+00:00")
        .before(datetime(2026, 1, 3, tzinfo=UTC))
    )
    assert [e.id for e in window] == [2, 3]  # inclusive bounds
    assert api.event_queries()[-1][1] == {
        "name": "orders",
        "uri": "s3://bucket/orders",
        "after": "2026-01-02T00:00:00Z",
        "before": "2026-01-03T00:00:00Z",
        "ascending": "true",
    }


def test_with_a_limit_the_end_is_the_end_of_the_first_n(inlet_events, api):
    first_two = inlet_events[ORDERS].limit(2)
    assert first_two[-1].id == 2
    assert api.event_queries()[-1][1]["limit"] == "2"
    assert api.event_queries()[-1][1]["ascending"] == "true"
    with pytest.raises(IndexError, match="beyond limit"):
        inlet_events[ORDERS].limit(2)[2]
    assert len(api.event_queries()) == 1  # no request for an index past the limit


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        pytest.param(lambda e: e.after("2026-01-01T00:00:00"), "timezone-aware", id="naive"),
        pytest.param(lambda e: e.before("yesterday"), "ISO 8601", id="not-a-date"),
        pytest.param(lambda e: e.limit(0), "at least 1", id="limit-0"),
    ],
)
def test_bad_narrowing_is_refused_before_any_request(inlet_events, api, bad, message):
    with pytest.raises(ValueError, match=message):
        bad(inlet_events[ORDERS])
    assert api.event_queries() == []


def test_alias_events_come_from_the_alias_route(inlet_events, api):
    assert [e.id for e in inlet_events[ALIAS]] == [1]
    assert [e.id for e in inlet_events.for_asset_alias(name="my_alias")] == [1]
    assert api.event_queries()[0] == ("by-asset-alias", {"name": "my_alias", "ascending": "true"})


def test_references_and_indexes(inlet_events, api):
    # a reference to a declared asset, by name: the server picks the active asset
    assert [e.id for e in inlet_events[Asset.ref(name="orders")]] == [1, 2, 3]
    assert api.event_queries()[-1] == ("by-asset", {"name": "orders", "ascending": "true"})
    assert inlet_events.resolved == []  # no lookup needed
    # a declared reference, read through the asset it points to: resolved once, through the server
    assert [e.id for e in inlet_events[OTHER]] == [4]
    assert [e.id for e in inlet_events.for_asset(name="other")] == [4]
    assert inlet_events.resolved == [Asset.ref(uri="s3://bucket/other")]
    # the declared reference itself
    assert len(inlet_events[Asset.ref(uri="s3://bucket/other")]) == 1
    assert api.event_queries()[-1] == (
        "by-asset",
        {"uri": "s3://bucket/other", "ascending": "true"},
    )
    # an index into the declared inlets
    assert inlet_events[0][0].id == 1
    assert list(inlet_events) == [ORDERS, ALIAS, Asset.ref(uri="s3://bucket/other")]
    assert len(inlet_events) == 3


@pytest.mark.parametrize(
    "key",
    [
        pytest.param(Asset("undeclared"), id="asset"),
        pytest.param(Asset.ref(name="undeclared"), id="name-ref"),
        pytest.param(Asset.ref(uri="s3://undeclared"), id="uri-ref"),
        pytest.param(AssetAlias("undeclared"), id="alias"),
    ],
)
def test_only_declared_inlets_can_be_read(inlet_events, api, key):
    with pytest.raises(KeyError, match="is not an inlet of this task"):
        inlet_events[key]
    assert key not in inlet_events
    assert api.event_queries() == []


def test_keys_of_another_type_are_a_type_error(inlet_events):
    with pytest.raises(TypeError, match="inlet_events keys are"):
        inlet_events["orders"]


def test_an_inlet_event_has_the_route_fields(inlet_events):
    event = inlet_events[ORDERS][0]
    assert isinstance(event, AssetEvent)
    assert event.id == 1
    assert event.timestamp == datetime(2026, 1, 1, tzinfo=UTC)
    assert event.timestamp.tzinfo is not None
    assert (event.asset.name, event.asset.uri, event.asset.group) == (
        "orders",
        "s3://bucket/orders",
        "asset",
    )
    assert event.asset.key == ORDERS.key
    assert event.extra == {"n": 1}
    assert (event.source_dag_id, event.source_run_id, event.source_task_id) == (
        "producer",
        "manual__1",
        "produce",
    )
    assert event.source_map_index == -1
    assert event.partition_key is None
    assert event.created_dagruns == ()
    assert event.source_aliases is None  # the route does not say


# -- triggering_asset_events -------------------------------------------------------------------

CONSUMED = [
    {
        "asset": {"name": "orders", "uri": "s3://bucket/orders", "extra": {"owner": "x"}},
        "extra": {"rows": 1},
        "source_task_id": "produce",
        "source_dag_id": "producer",
        "source_run_id": "manual__1",
        "source_map_index": -1,
        "source_aliases": [],
        "timestamp": "2026-01-01T00:00:00Z",
        "partition_key": None,
    },
    {
        "asset": {"name": "orders", "uri": "s3://bucket/orders", "extra": {"owner": "x"}},
        "extra": {"rows": 2},
        "source_task_id": "produce",
        "source_dag_id": "producer",
        "source_run_id": "manual__2",
        "source_map_index": -1,
        "source_aliases": [{"name": "my_alias"}],
        "timestamp": "2026-01-02T01:00:00+01:00",
        "partition_key": "p1",
    },
]


@pytest.fixture
def triggering():
    def resolve(ref):
        assert ref == Asset.ref(name="orders")
        return ORDERS.key, {}

    return TriggeringAssetEventsAccessor.from_run_context(
        {"dag_run": {"consumed_asset_events": CONSUMED}}, resolver=resolve
    )


def test_triggering_events_by_asset_key_alias_and_ref(triggering):
    by_asset = triggering[ORDERS]
    assert [e.extra["rows"] for e in by_asset] == [1, 2]
    assert triggering[ORDERS.key] == by_asset
    assert triggering[Asset("orders", "s3://bucket/orders", extra={"other": "extra"})] == by_asset
    assert triggering[Asset.ref(name="orders")] == by_asset
    assert triggering.for_asset(name="orders", uri="s3://bucket/orders") == by_asset
    assert [e.extra["rows"] for e in triggering[ALIAS]] == [2]
    assert triggering.for_asset_alias(name="my_alias") == triggering[ALIAS]
    assert list(triggering) == [ORDERS.key, AssetAliasUniqueKey("my_alias")]
    assert len(triggering) == 2
    assert dict(triggering.items())[ORDERS.key] == by_asset
    with pytest.raises(KeyError):
        triggering[OTHER]
    assert OTHER not in triggering


def test_a_triggering_event_has_the_run_context_fields(triggering):
    first, second = triggering[ORDERS]
    assert second.timestamp == datetime(2026, 1, 2, 1, 0, tzinfo=timezone(timedelta(hours=1)))
    assert second.timestamp == datetime(2026, 1, 2, 0, 0, tzinfo=UTC)  # the same instant
    assert second.source_aliases == (AssetAliasUniqueKey("my_alias"),)
    assert first.source_aliases == ()
    assert second.partition_key == "p1"
    assert second.asset.extra == {"owner": "x"}
    assert second.asset.group is None  # the run context does not say
    assert second.id is None
    assert (second.source_dag_id, second.source_run_id, second.source_task_id) == (
        "producer",
        "manual__2",
        "produce",
    )


def test_no_triggering_events_outside_an_asset_triggered_run():
    triggering = TriggeringAssetEventsAccessor.from_run_context({"dag_run": {}})
    assert len(triggering) == 0
    assert ORDERS not in triggering


# -- in a real task process ---------------------------------------------------------------------


def test_a_consumer_task_reads_both_through_the_supervisor():
    api = FakeExecutionAPI(asset_events=[dict(e) for e in EVENTS])
    api.run_context["dag_run"]["consumed_asset_events"] = CONSUMED
    with make_client(api) as client:
        result = Supervisor(client, TI_ID, task_ref("consume"), heartbeat_interval=30).run()

    assert result.succeeded, result
    [stored] = api.bodies("POST /return_value")
    value = json.loads(stored)
    assert value["newest"] == {"id": 3, "extra": {"rows": 3}, "at": "2026-01-03T00:00:00+00:00"}
    assert value["count"] == 3
    assert value["extras"] == [{"n": 1}, {"n": 2}, {"rows": 3}]
    assert value["through_alias"] == [1]
    assert value["triggering"] == [
        {
            "asset": "orders",
            "extra": {"rows": 1},
            "aliases": [],
            "source": ["producer", "manual__1", "produce"],
            "aware": True,
        },
        {
            "asset": "orders",
            "extra": {"rows": 2},
            "aliases": ["my_alias"],
            "source": ["producer", "manual__2", "produce"],
            "aware": True,
        },
    ]
    assert value["triggering_keys"] == [
        "AssetAliasUniqueKey(name='my_alias')",
        "AssetUniqueKey(name='orders', uri='s3://bucket/orders')",
    ]
    assert api.event_queries() == [
        (
            "by-asset",
            {"name": "orders", "uri": "s3://bucket/orders", "ascending": "false", "limit": "1"},
        ),
        ("by-asset", {"name": "orders", "uri": "s3://bucket/orders", "ascending": "true"}),
        ("by-asset-alias", {"name": "my_alias", "ascending": "true"}),
    ]


def test_reading_an_undeclared_inlet_fails_the_task():
    api = FakeExecutionAPI(asset_events=[dict(e) for e in EVENTS])
    with make_client(api) as client:
        result = Supervisor(
            client, TI_ID, task_ref("reads_an_undeclared_inlet"), heartbeat_interval=30
        ).run()
    assert result.state == "failed"
    assert "KeyError" in result.reason
    assert "is not an inlet of this task" in result.reason
    assert api.event_queries() == []


def test_a_failing_events_request_fails_the_task_with_the_servers_reason():
    api = FakeExecutionAPI(asset_events=[dict(e) for e in EVENTS], faults={"GET /by-asset": [403]})
    with make_client(api) as client:
        result = Supervisor(client, TI_ID, task_ref("consume"), heartbeat_interval=30).run()
    assert result.state == "failed"
    assert "cannot read asset events" in result.reason
    assert "403: fault: injected" in result.reason
