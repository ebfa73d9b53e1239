"""assets_app.validators: the one rule for DAG, task and run ids, and for a mapping's keys."""

from __future__ import annotations

import re

import pytest

from assets_app.validators import validate_id, validate_keys, value_describe


@pytest.mark.parametrize("value", ["d", "a.b-c_1", "x" * 250])
def test_valid_ids_are_returned(value):
    assert validate_id(value) == value


@pytest.mark.parametrize(
    ("value", "message"),
    [
        pytest.param("", "must be a non-empty string", id="empty"),
        pytest.param(None, "must be a non-empty string", id="none"),
        pytest.param(7, "must be a non-empty string", id="not-a-string"),
        pytest.param("x" * 251, "must be 1-250 characters, got 251 (longer than 250)", id="long"),
        pytest.param(
            "bad id",
            "'bad id' may only contain letters, digits, underscores, dots and dashes",
            id="chars",
        ),
    ],
)
def test_invalid_ids_say_what_is_wrong(value, message):
    with pytest.raises(ValueError) as error:  # noqa: PT011 - the whole message is asserted below
        validate_id(value)
    assert str(error.value) == message


def test_run_ids_only_have_the_length_limit():
    assert validate_id("manual__2026-01-01T00:00:00+00:00", pattern=False).startswith("manual")
    with pytest.raises(ValueError, match="may only contain"):
        validate_id("manual__2026-01-01T00:00:00+00:00")
    with pytest.raises(ValueError, match="longer than 250"):
        validate_id("r" * 251, pattern=False)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        pytest.param([], "expected a mapping, got a list", id="list"),
        pytest.param(None, "expected a mapping, got null", id="null"),
        pytest.param("x", "expected a mapping, got the string 'x'", id="string"),
        pytest.param(
            {"name": "n", "colour": 1, "size": 2},
            "unknown key(s) colour, size (allowed: group, name)",
            id="unknown",
        ),
        pytest.param({"group": "g"}, "missing required key(s) name", id="missing"),
    ],
)
def test_a_mapping_with_other_keys_says_which(value, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        validate_keys(value, allowed=("name", "group"), required=("name",))


def test_a_mapping_with_allowed_keys_is_returned():
    value = {"name": "n"}
    assert validate_keys(value, allowed=("name", "group"), required=("name",)) is value


@pytest.mark.parametrize(
    ("value", "described"),
    [
        (None, "null"),
        (True, "a boolean"),
        (1.5, "a number"),
        ("a", "the string 'a'"),
        ([1], "a list"),
        ({}, "an empty mapping"),
        ({"b": 1, "a": 2}, "a mapping with the key(s) a, b"),
    ],
)
def test_values_are_described_as_json_names_them(value, described):
    assert value_describe(value) == described
