"""executionapi.serializers.common: U+0000 detection, the strict bases, the leaf fields."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework import serializers

from executionapi.exceptions import validation_errors
from executionapi.serializers.common import (
    LeanSerializer,
    StorableJSONField,
    StrictSerializer,
    StrictStringField,
    nul_character_path,
)


@pytest.mark.parametrize(
    ("value", "path"),
    [
        pytest.param({"a": [1, "x", {"b": None}], "c": 2.5, "d": True}, None, id="clean"),
        pytest.param(7, None, id="scalar"),
        pytest.param("a\x00", [], id="top-level-string"),
        pytest.param({"a": [1, {"b": "x\x00y"}]}, ["a", 1, "b"], id="nested-value"),
        pytest.param({"a": {"k\x00": 1}}, ["a", "k\x00"], id="key"),
        pytest.param([[[["\x00"]]]], [0, 0, 0, 0], id="lists"),
    ],
)
def test_nul_character_path(value, path):
    assert nul_character_path(value) == path


def test_nul_character_path_has_no_depth_limit():
    value: Any = "\x00"
    for _ in range(5000):
        value = {"k": [value]}

    assert nul_character_path(value) == ["k", 0] * 5000


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
