"""executionapi.serializers.outlets: outlet events and declared outlets, both wire formats, as
the typed values of assets_app.outlets (no database, no HTTP)."""

from __future__ import annotations

from typing import Any

import pytest

from assets_app.outlets import AliasOutletEvent, AssetOutletEvent, OutletProfile, OutletType
from executionapi.exceptions import validation_errors
from executionapi.serializers.outlets import OutletEventsField
from executionapi.serializers.task_instances import TISuccessStatePayloadSerializer
from task_sdk.definitions import AssetUniqueKey

END = "2026-11-30T04:50:58.540508Z"
KEY = {"name": "a", "uri": "s3://a"}
ALIAS_EVENT = {"source_alias_name": "al", "dest_asset_key": KEY}


def _parse(outlet_events: Any, **payload: Any) -> TISuccessStatePayloadSerializer:
    serializer = TISuccessStatePayloadSerializer(
        data={"state": "success", "end_date": END, "outlet_events": outlet_events, **payload}
    )
    serializer.is_valid()
    return serializer


def _events(outlet_events: Any) -> list[Any]:
    serializer = _parse(outlet_events)
    assert not serializer.errors, serializer.errors
    return list(serializer.validated_data["outlet_events"])


def _errors(outlet_events: Any, **payload: Any) -> list[tuple[list[Any], str, str]]:
    return [
        (e["loc"], e["msg"], e["type"])
        for e in validation_errors(_parse(outlet_events, **payload).errors)
    ]


def test_each_airflow_shape_becomes_its_event():
    events = _events(
        [
            {"dest_asset_key": KEY},
            {"dest_asset_key": KEY, "extra": {"k": 1}, "partition_key": "p"},
            ALIAS_EVENT,
            {**ALIAS_EVENT, "dest_asset_extra": {"d": 1}, "extra": {"e": 2}, "partition_key": None},
        ]
    )

    key = AssetUniqueKey(name="a", uri="s3://a")
    assert events == [
        AssetOutletEvent(key=key),
        AssetOutletEvent(key=key, extra={"k": 1}, partition_key="p"),
        AliasOutletEvent(source_alias_name="al", dest_asset_key=key),
        AliasOutletEvent(
            source_alias_name="al", dest_asset_key=key, extra={"e": 2}, dest_asset_extra={"d": 1}
        ),
    ]


def test_seed_accessors_are_flattened_in_order():
    events = _events(
        [
            # an asset's accessor: its event, then the alias events it holds
            {"key": KEY, "extra": {"x": 1}, "asset_alias_events": [ALIAS_EVENT]},
            # an alias's accessor (no uri): only its alias events
            {"key": {"name": "al"}, "extra": {}, "asset_alias_events": [ALIAS_EVENT] * 2},
            {"key": {"name": "al", "uri": None}, "asset_alias_events": None},
        ]
    )

    alias_event = AliasOutletEvent(
        source_alias_name="al", dest_asset_key=AssetUniqueKey(name="a", uri="s3://a")
    )
    assert events == [
        AssetOutletEvent(key=AssetUniqueKey(name="a", uri="s3://a"), extra={"x": 1}),
        alias_event,
        alias_event,
        alias_event,
    ]


def test_null_or_omitted_outlets_are_none():
    serializer = TISuccessStatePayloadSerializer(data={"state": "success", "end_date": END})

    assert serializer.is_valid(), serializer.errors
    assert serializer.payload().task_outlets == ()
    assert serializer.payload().outlet_events == ()
    assert _events(None) == []


@pytest.mark.parametrize(
    ("outlet_events", "expected"),
    [
        pytest.param("x", [([], "Input should be a valid list", "list_type")], id="not-a-list"),
        pytest.param([1], [([0], "Input should be a JSON object", "dict_type")], id="not-object"),
        pytest.param(
            [{"extra": {}}],
            [
                (
                    [0],
                    "Unrecognized outlet event: expected dest_asset_key, source_alias_name or key",
                    "union_tag_not_found",
                )
            ],
            id="no-tag",
        ),
        pytest.param(
            [{"dest_asset_key": {"name": "a"}, "bogus": 1}],
            [
                ([0, "dest_asset_key", "uri"], "Field required", "missing"),
                ([0, "bogus"], "Extra inputs are not permitted", "extra_forbidden"),
            ],
            id="missing-and-unknown",
        ),
        pytest.param(
            [{"dest_asset_key": None}],
            [
                (
                    [0, "dest_asset_key"],
                    "Input should be a JSON object with name and uri",
                    "dict_type",
                )
            ],
            id="key-null",
        ),
        pytest.param(
            [{**ALIAS_EVENT, "source_alias_name": 5, "extra": None}],
            [
                ([0, "source_alias_name"], "Input should be a valid string", "string_type"),
                ([0, "extra"], "Input should be a JSON object", "dict_type"),
            ],
            id="no-coercion",
        ),
        pytest.param(
            [{"dest_asset_key": {"name": "", "uri": "u" * 1501}}],
            [
                (
                    [0, "dest_asset_key", "name"],
                    "String should have at least 1 character",
                    "string_too_short",
                ),
                (
                    [0, "dest_asset_key", "uri"],
                    "String should have at most 1500 characters",
                    "string_too_long",
                ),
            ],
            id="lengths",
        ),
        pytest.param(
            [{"dest_asset_key": KEY, "partition_key": " \t"}],
            [([0, "partition_key"], "String should not be only whitespace", "string_blank")],
            id="blank-partition",
        ),
        pytest.param(
            [{"dest_asset_key": KEY, "extra": {"k": [{"x\x00": 1}]}}],
            [
                (
                    [0, "extra", "k", 0, "x\x00"],
                    "Input should not contain NUL characters (\\u0000)",
                    "null_characters_not_allowed",
                )
            ],
            id="nul-in-extra",
        ),
        pytest.param(
            [{"key": KEY, "asset_alias_events": [ALIAS_EVENT, {**ALIAS_EVENT, "extra": 1}, 7]}],
            [
                (
                    [0, "asset_alias_events", 1, "extra"],
                    "Input should be a JSON object",
                    "dict_type",
                ),
                ([0, "asset_alias_events", 2], "Input should be a JSON object", "dict_type"),
            ],
            id="nested-alias-events",
        ),
        pytest.param(
            [{"key": "al", "asset_alias_events": {}}],
            [
                ([0, "key"], "Input should be a JSON object", "dict_type"),
                ([0, "asset_alias_events"], "Input should be a valid list", "list_type"),
            ],
            id="accessor",
        ),
    ],
)
def test_every_bad_field_is_named(outlet_events, expected):
    assert _errors(outlet_events) == [
        (["body", "outlet_events", *loc], msg, type_) for loc, msg, type_ in expected
    ]


@pytest.mark.parametrize(
    "outlet_events",
    [
        pytest.param([ALIAS_EVENT] * 4, id="events"),
        pytest.param(
            [{"key": {"name": "al"}, "asset_alias_events": [ALIAS_EVENT] * 2}] * 2, id="flattened"
        ),
    ],
)
def test_at_most_the_configured_number_of_events(settings, outlet_events):
    settings.EXECUTION_API = {**settings.EXECUTION_API, "MAX_OUTLET_EVENTS": 3}

    assert _errors(outlet_events) == [
        (
            ["body", "outlet_events"],
            "At most 3 outlet events are accepted per request",
            "too_long",
        )
    ]
    assert len(_events([ALIAS_EVENT] * 3)) == 3


def test_payloads_share_nothing():
    # the shape serializers serve every payload: one payload's errors never reach the next
    bad = _errors([{**ALIAS_EVENT, "extra": 1}])

    assert _events([ALIAS_EVENT]) == _events([ALIAS_EVENT])
    assert _errors([{**ALIAS_EVENT, "extra": 1}]) == bad
    assert OutletEventsField().run_validation([]) == []


# --- declared outlets -------------------------------------------------------------------------


def test_profiles_of_each_type_and_the_seeds_asset_type():
    serializer = _parse(
        [],
        asset_type="Asset",
        task_outlets=[
            {"name": "a", "uri": "s3://a"},  # typed by the payload's asset_type
            {"name": "n", "type": "AssetNameRef"},
            {"uri": "s3://u", "type": "AssetUriRef", "name": None},
            {"name": "al", "asset_type": "AssetAlias", "uri": "ignored"},
        ],
    )

    assert not serializer.errors, serializer.errors
    assert serializer.payload().task_outlets == (
        OutletProfile(type=OutletType.ASSET, name="a", uri="s3://a"),
        OutletProfile(type=OutletType.NAME_REF, name="n"),
        OutletProfile(type=OutletType.URI_REF, uri="s3://u"),
        OutletProfile(type=OutletType.ALIAS, name="al"),
    )


def test_in_the_seed_format_aliases_named_in_alias_events_are_declared():
    serializer = _parse([{**ALIAS_EVENT, "source_alias_name": "seed"}], asset_type="AssetAlias")

    assert not serializer.errors, serializer.errors
    assert serializer.payload().task_outlets == (OutletProfile(type=OutletType.ALIAS, name="seed"),)


@pytest.mark.parametrize(
    ("task_outlets", "expected"),
    [
        pytest.param("x", [([], "Input should be a valid list", "list_type")], id="not-a-list"),
        pytest.param([None], [([0], "Input should be a JSON object", "dict_type")], id="null"),
        pytest.param(
            [{"name": "a", "uri": "s3://a", "type": "Asset", "asset_type": "AssetAlias"}],
            [([0, "asset_type"], "Contradicts type", "value_error")],
            id="contradiction",
        ),
        pytest.param(
            [{"name": "a", "type": "Asset"}, {"uri": "s3://u", "type": "AssetNameRef", "x": 1}],
            [
                ([0, "uri"], "Required for Asset", "missing"),
                ([1, "x"], "Extra inputs are not permitted", "extra_forbidden"),
            ],
            id="per-profile",
        ),
    ],
)
def test_every_bad_profile_is_named(task_outlets, expected):
    assert _errors([], task_outlets=task_outlets) == [
        (["body", "task_outlets", *loc], msg, type_) for loc, msg, type_ in expected
    ]
