"""outlet_events accessors and the wire payload built from them."""

import pytest

from task_sdk.definitions import Asset, AssetAlias, AssetUniqueKey
from task_sdk.outlets import (
    Metadata,
    OutletEventAccessors,
    build_task_outlets,
    serialize_outlet_events,
)

ONE = Asset("asset_one", "s3://bucket/one")
ALIAS = AssetAlias("my_alias")


def resolver(ref):
    if getattr(ref, "name", None) == "by_name" or getattr(ref, "uri", None) == "s3://bucket/by":
        return AssetUniqueKey("by_name", "s3://bucket/by"), {"from": "server"}
    raise LookupError(ref)


def test_untouched_accessors_send_nothing():
    assert serialize_outlet_events(OutletEventAccessors()) == []


def test_asset_extra():
    events = OutletEventAccessors()
    events[ONE].extra["k"] = "v"
    events[Asset("asset_one", "s3://bucket/one", extra={"ignored": True})].extra["k2"] = 1
    assert serialize_outlet_events(events) == [
        {
            "dest_asset_key": {"name": "asset_one", "uri": "s3://bucket/one"},
            "extra": {"k": "v", "k2": 1},
        }
    ]


def test_alias_add_with_asset_and_ref():
    events = OutletEventAccessors(resolver)
    events[ALIAS].add(Asset("dyn", "s3://bucket/dyn", extra={"lvl": 1}), extra={"k": "v"})
    events[ALIAS].add(Asset.ref(name="by_name"))
    assert serialize_outlet_events(events) == [
        {
            "source_alias_name": "my_alias",
            "dest_asset_key": {"name": "dyn", "uri": "s3://bucket/dyn"},
            "dest_asset_extra": {"lvl": 1},
            "extra": {"k": "v"},
        },
        {
            "source_alias_name": "my_alias",
            "dest_asset_key": {"name": "by_name", "uri": "s3://bucket/by"},
            "dest_asset_extra": {"from": "server"},
            "extra": {},
        },
    ]


def test_refs_resolve_to_the_same_accessor_as_the_asset():
    events = OutletEventAccessors(resolver)
    events[Asset.ref(name="by_name")].extra["a"] = 1
    events[Asset.ref(uri="s3://bucket/by")].extra["b"] = 2
    events.for_asset(name="by_name", uri="s3://bucket/by").extra["c"] = 3
    assert len(events) == 1
    assert serialize_outlet_events(events)[0]["extra"] == {"a": 1, "b": 2, "c": 3}


def test_refs_need_a_resolver():
    with pytest.raises(RuntimeError, match="inside a running task"):
        OutletEventAccessors()[Asset.ref(name="x")]


def test_partitions_one_event_each_in_order_without_duplicates():
    events = OutletEventAccessors()
    events[ONE].extra["k"] = "v"
    events[ONE].add_partitions("2025-01-01", "2025-01-02")
    events[ONE].add_partitions(["2025-01-02", "2025-01-03"])
    payload = serialize_outlet_events(events)
    assert [e["partition_key"] for e in payload] == ["2025-01-01", "2025-01-02", "2025-01-03"]
    assert all(e["extra"] == {"k": "v"} for e in payload)


@pytest.mark.parametrize("bad", ["", "  ", "x" * 251])
def test_partition_key_rules(bad):
    with pytest.raises(ValueError, match="partition_key"):
        OutletEventAccessors()[ONE].add_partitions(bad)


def test_alias_accessor_rejects_partitions_and_asset_accessor_rejects_add():
    events = OutletEventAccessors()
    with pytest.raises(TypeError):
        events[ALIAS].add_partitions("p")
    with pytest.raises(TypeError):
        events[ONE].add(Asset("x"))


def test_bad_key():
    with pytest.raises(TypeError):
        OutletEventAccessors()["asset_one"]


def test_metadata():
    events = OutletEventAccessors()
    events.record_metadata(Metadata(ONE, {"k": "m"}, alias=ALIAS))
    payload = serialize_outlet_events(events)
    assert payload[0] == {
        "dest_asset_key": {"name": "asset_one", "uri": "s3://bucket/one"},
        "extra": {"k": "m"},
    }
    assert payload[1]["source_alias_name"] == "my_alias"


def test_task_outlets_profiles_in_declaration_order():
    assert build_task_outlets([ONE, ALIAS, Asset.ref(name="n"), Asset.ref(uri="u")]) == [
        {"name": "asset_one", "uri": "s3://bucket/one", "type": "Asset"},
        {"name": "my_alias", "uri": None, "type": "AssetAlias"},
        {"name": "n", "uri": None, "type": "AssetNameRef"},
        {"name": None, "uri": "u", "type": "AssetUriRef"},
    ]
