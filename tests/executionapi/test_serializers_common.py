"""executionapi.serializers.common: storable JSON values, the strict bases, the leaf fields."""

from __future__ import annotations

import math
from typing import Any

import pytest
from rest_framework import serializers

from executionapi.exceptions import validation_errors
from executionapi.serializers.common import (
    LeanSerializer,
    StorableJSONField,
    StrictSerializer,
    StrictStringField,
    json_value_error,
)
from task_sdk.jsonvalues import MAX_JSON_DEPTH


def _error(value: Any, max_bytes: int | None = None) -> tuple[list[Any], str] | None:
    error = json_value_error(value, max_bytes=max_bytes)
    if error is None:
        return None
    [item] = validation_errors(error.detail)
    return item["loc"], item["type"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param({"a": [1, "x", {"b": None}], "c": 2.5, "d": True}, None, id="clean"),
        pytest.param(7, None, id="scalar"),
        pytest.param("a\x00", (["body"], "null_characters_not_allowed"), id="top-level-string"),
        pytest.param(
            {"a": [1, {"b": "x\x00y"}]},
            (["body", "a", 1, "b"], "null_characters_not_allowed"),
            id="nested-nul",
        ),
        pytest.param(
            {"a": {"k\x00": 1}}, (["body", "a", "k\x00"], "null_characters_not_allowed"), id="key"
        ),
        pytest.param(
            [[[["\x00"]]]], (["body", 0, 0, 0, 0], "null_characters_not_allowed"), id="lists"
        ),
        pytest.param({"r": math.nan}, (["body", "r"], "finite_number"), id="nan"),
        pytest.param({"r": [math.inf]}, (["body", "r", 0], "finite_number"), id="inf"),
        pytest.param({"r": "\ud800"}, (["body", "r"], "string_unicode"), id="surrogate"),
        pytest.param({"\udfff": 1}, (["body", "\udfff"], "string_unicode"), id="surrogate-key"),
    ],
)
def test_json_value_error_names_the_value(value, expected):
    assert _error(value) == expected


def test_json_value_depth_limit_is_the_task_sdks():
    fits: Any = []
    for _ in range(MAX_JSON_DEPTH - 1):
        fits = [fits]
    assert _error(fits) is None
    # level 65 is the list at [0][0]...[0], 64 indexes down
    assert _error([fits]) == (["body", *[0] * MAX_JSON_DEPTH], "too_deep")

    deep: Any = "x"  # far deeper than any recursion limit: checked iteratively
    for _ in range(5000):
        deep = {"k": [deep]}
    assert _error(deep) == (["body", *["k", 0] * 32], "too_deep")


def test_json_value_size_limit():
    assert _error({"k": "abc"}, max_bytes=11) is None  # {"k":"abc"} is 11 bytes
    assert _error({"k": "abcd"}, max_bytes=11) == (["body"], "too_large")
    assert _error({"k": "é"}, max_bytes=9) == (["body"], "too_large")  # UTF-8 bytes count


@pytest.mark.parametrize(
    ("object_only", "value", "expected"),
    [
        pytest.param(False, [1, {"v": "\x00"}], [["body", 1, "v"]], id="at-the-string"),
        pytest.param(False, None, [], id="null-is-a-value"),
        pytest.param(True, [1], [["body"]], id="object-only"),
    ],
)
def test_storable_json_names_where_it_cannot_be_stored(object_only, value, expected):
    field = StorableJSONField(object_only=object_only)
    try:
        field.run_validation(value)
        errors = []
    except serializers.ValidationError as exc:
        errors = validation_errors(exc.detail)

    assert [error["loc"] for error in errors] == expected


class Item(LeanSerializer):
    name = StrictStringField()
    note = StrictStringField(required=False, allow_null=True, max_length=3, not_blank=True)


class Payload(StrictSerializer):
    items = Item(many=True)
    flag = serializers.BooleanField(required=False)


def _validate(data: Any) -> tuple[Any, list[tuple[list[Any], str]]]:
    serializer = Payload(data=data)
    if serializer.is_valid():
        return serializer.validated_data, []
    return None, [(e["loc"], e["type"]) for e in validation_errors(serializer.errors)]


def test_lean_items_keep_absent_optional_fields_out():
    data, errors = _validate({"items": [{"name": "a"}, {"name": "b", "note": None}]})

    assert errors == []
    assert data["items"] == [{"name": "a"}, {"name": "b", "note": None}]


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        pytest.param([], [(["body"], "dict_type")], id="payload-not-object"),
        pytest.param({"items": "x"}, [(["body", "items"], "list_type")], id="not-a-list"),
        pytest.param({}, [(["body", "items"], "missing")], id="missing-list"),
        pytest.param(
            {"items": [None, {}, {"name": 1}]},
            [
                (["body", "items", 0], "dict_type"),
                (["body", "items", 1, "name"], "missing"),
                (["body", "items", 2, "name"], "string_type"),
            ],
            id="items",
        ),
        pytest.param(
            {"items": [{"name": "a", "note": "long", "x": 1}], "y": 2},
            [
                (["body", "items", 0, "note"], "string_too_long"),
                (["body", "items", 0, "x"], "extra_forbidden"),
                (["body", "y"], "extra_forbidden"),
            ],
            id="unknown-keys-with-field-errors",
        ),
        pytest.param(
            {"items": [{"name": "a\x00", "note": "  "}]},
            [
                (["body", "items", 0, "name"], "null_characters_not_allowed"),
                (["body", "items", 0, "note"], "string_blank"),
            ],
            id="nul-and-blank",
        ),
    ],
)
def test_lean_and_strict_name_every_bad_field(data, expected):
    assert _validate(data)[1] == expected


def test_a_payload_class_builds_its_fields_once_and_its_instances_share_them():
    from executionapi.serializers.task_instances import TISuccessStatePayloadSerializer

    first = TISuccessStatePayloadSerializer(data={})
    second = TISuccessStatePayloadSerializer(data={"state": "success"})

    assert first.fields is second.fields
    assert list(first.fields) == [
        "state",
        "end_date",
        "task_outlets",
        "outlet_events",
        "rendered_map_index",
        "asset_type",
    ]


def test_payloads_validated_at_once_in_threads_do_not_see_each_other():
    # the seed format's top-level asset_type types the profiles of its own payload only
    from concurrent.futures import ThreadPoolExecutor

    from executionapi.serializers.task_instances import TISuccessStatePayloadSerializer

    def validate(n: int) -> tuple[int, bool, Any]:
        body: dict[str, Any] = {
            "state": "success",
            "end_date": "2026-11-30T00:00:00Z",
            "task_outlets": [{"name": f"a{n}", "uri": f"s3://b/{n}"}],  # no own type
            "outlet_events": [],
        }
        if n % 2:
            body["asset_type"] = "Asset"
        serializer = TISuccessStatePayloadSerializer(data=body)
        valid = serializer.is_valid()
        return n, valid, serializer.payload().task_outlets[0].name if valid else serializer.errors

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(validate, range(400)))

    assert all(valid == bool(n % 2) for n, valid, _ in results)
    assert all(out == f"a{n}" for n, valid, out in results if valid)
    assert all("task_outlets" in out for n, valid, out in results if not valid)
