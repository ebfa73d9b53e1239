"""Input rules shared by several entry points: DAG, task and run ids (the manifest and
``create_task_instance``), the keys of a mapping (the manifest and the asset conditions), and
the JSON values every route stores."""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping
from typing import Any

from assets_app.models import ID_LENGTH
from task_sdk.jsonvalues import JSONProblem, json_problem

#: Airflow's rule for DAG and task ids (run ids only have the length limit).
KEY_PATTERN = re.compile(r"^[\w.-]+$")


def validate_id(value: object, *, pattern: bool = True) -> str:
    """Return ``value`` when it is a valid DAG or task id (a run id with ``pattern=False``).

    Raises ``ValueError`` saying what is wrong without naming the field; callers prefix the
    field's name and raise their own domain error.
    """
    if not isinstance(value, str) or not value:
        raise ValueError("must be a non-empty string")
    if len(value) > ID_LENGTH:
        raise ValueError(
            f"must be 1-{ID_LENGTH} characters, got {len(value)} (longer than {ID_LENGTH})"
        )
    if pattern and not KEY_PATTERN.match(value):
        raise ValueError(
            f"{value!r} may only contain letters, digits, underscores, dots and dashes"
        )
    return value


def validate_keys(
    value: object, *, allowed: Collection[str], required: Collection[str] = ()
) -> Mapping[str, Any]:
    """Return ``value`` when it is a mapping with only ``allowed`` keys and every ``required``
    one.

    Raises ``ValueError`` saying what is wrong without naming the field; callers prefix the
    field's name and raise their own domain error.
    """
    if type(value) is not dict and not isinstance(value, Mapping):  # a dict: the fast check
        raise ValueError(f"expected a mapping, got {value_describe(value)}")
    unknown = value.keys() - allowed  # any iterable: no set built per call
    if unknown:
        listed = ", ".join(sorted(str(key) for key in unknown))
        raise ValueError(f"unknown key(s) {listed} (allowed: {', '.join(sorted(allowed))})")
    missing = [key for key in required if key not in value]
    if missing:
        raise ValueError(f"missing required key(s) {', '.join(sorted(missing))}")
    return value


def value_describe(value: object) -> str:
    """What a decoded JSON (or YAML) value is, for a message saying it is not what was
    expected: ``null``, ``a boolean``, ``a number``, ``the string 'x'``, ``a list``, ``an empty
    mapping`` or ``a mapping with the key(s) a, b``."""
    if isinstance(value, Mapping):
        if not value:
            return "an empty mapping"
        return f"a mapping with the key(s) {', '.join(sorted(str(key) for key in value))}"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, list):
        return "a list"
    return f"a {type(value).__name__}"


def json_value_problem(value: object, *, max_bytes: int | None = None) -> JSONProblem | None:
    """Why a JSON value (an event's ``extra``, an XCom value, rendered fields …) cannot be
    stored, or ``None`` when it can.

    The rule is the task SDK's (:func:`task_sdk.jsonvalues.json_problem`), so runners and the
    server refuse the same values: ``NaN``, ``±Infinity`` (also a number such as ``1e400`` that
    overflows to it when parsed), U+0000 and lone surrogates (PostgreSQL's ``jsonb`` and text
    refuse them), and objects or lists nested deeper than
    :data:`~task_sdk.jsonvalues.MAX_JSON_DEPTH` (64) levels, the outermost being level 1.
    With ``max_bytes``, a value longer than that as compact UTF-8 JSON is refused too
    (code ``too_large``).
    """
    problem = json_problem(value)
    if problem is None and max_bytes is not None:
        size = json_size(value)
        if size > max_bytes:
            message = f"is {size} bytes as JSON, more than the {max_bytes} accepted"
            problem = JSONProblem((), message, "too_large")
    return problem


def json_size(value: object) -> int:
    """Bytes of ``value`` as compact UTF-8 JSON, as stored."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())
