"""JSON the server can store, checked before anything is sent.

Python's ``json`` module writes values that are not JSON (``NaN``, ``Infinity``) and strings
that PostgreSQL's ``jsonb`` refuses (a lone surrogate such as ``"\\ud800"``, or U+0000), and
silently turns non-string object keys into strings (``{1: "a", "1": "b"}`` becomes two ``"1"``
keys). The server answers such a body with an error, and a retried 500 would leave the task
instance ``running``; so the task process checks what it is about to send and fails the task at
once with a message naming the value, e.g.
``outlet_events[Asset(name='x', uri='x')].extra['r']: NaN is not valid JSON``.

Accepted: ``None``, ``bool``, ``int``, finite ``float``, ``str`` without U+0000 or surrogates,
``list`` / ``tuple`` (sent as a list) and ``dict`` with ``str`` keys, subclasses included, nested
at most :data:`MAX_JSON_DEPTH` levels: the outermost object or list (an event's ``extra``, an XCom
value) is level 1, each object or list inside it one level deeper; strings, numbers, booleans and
null do not count as a level. The server refuses deeper values with a 422.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

#: Deepest nesting of objects and lists the server stores (the outermost one is level 1).
MAX_JSON_DEPTH = 64

_SURROGATE = re.compile("[\ud800-\udfff]")
#: A character PostgreSQL cannot store: U+0000 or a lone surrogate (one search, C speed).
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
#: Above this many bits an int may exceed Python's int-to-text digit limit (4300 by default).
_LONG_INT_BITS = 14_000
#: A path longer than this is shown shortened in messages.
_SHOWN_PATH = 6

JSONPath = tuple[str | int, ...]


@dataclass(frozen=True)
class JSONProblem:
    """The first value in a document the server cannot store, and why."""

    path: JSONPath  # keys and list indexes from the checked value down to the bad one
    message: str
    #: What is wrong, for machines: ``null_characters_not_allowed``, ``string_unicode``,
    #: ``finite_number``, ``too_deep``, ``key_type``, ``json_type`` (not a JSON value) or
    #: ``int_too_long`` (the server answers these in its 422s as the error's ``type``).
    code: str = "json_type"

    def describe(self, where: str) -> str:
        """``<where><path>: <message>``, e.g. ``extra['r'][0]: NaN is not valid JSON``."""
        return f"{where}{format_path(self.path)}: {self.message}"


def format_path(path: JSONPath) -> str:
    """``['a'][0]``; long paths keep their first levels and the last one."""

    def part(key: str | int) -> str:
        if isinstance(key, str) and len(key) > 60:
            return f"[{key[:40]!r}…]"
        return f"[{key!r}]"

    if len(path) > _SHOWN_PATH:
        shown = [*map(part, path[: _SHOWN_PATH - 2]), "[…]", part(path[-1])]
        return "".join(shown)
    return "".join(map(part, path))


def string_problem(text: str) -> str | None:
    """Why PostgreSQL cannot store ``text`` (None when it can)."""
    if "\x00" in text:
        return "contains U+0000 (NUL), which PostgreSQL cannot store"
    if match := _SURROGATE.search(text):
        return f"contains the lone surrogate U+{ord(match.group()):04X}, which is not valid Unicode"
    return None


def _string_code(text: str) -> str:
    return "null_characters_not_allowed" if "\x00" in text else "string_unicode"


def _scalar_problem(value: object, path: JSONPath) -> JSONProblem | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, str):
        message = string_problem(value)
        return None if message is None else JSONProblem(path, message, _string_code(value))
    if isinstance(value, int):
        if value.bit_length() > _LONG_INT_BITS:
            try:
                int.__repr__(value)
            except ValueError:
                limit = sys.get_int_max_str_digits()
                message = f"an integer with more than {limit} digits cannot be written as JSON"
                return JSONProblem(path, message, "int_too_long")
        return None
    if isinstance(value, float):
        if math.isnan(value):
            return JSONProblem(path, "NaN is not valid JSON", "finite_number")
        if math.isinf(value):
            sign = "-" if value < 0 else ""
            return JSONProblem(path, f"{sign}Infinity is not valid JSON", "finite_number")
        return None
    kind = type(value).__name__
    message = f"{kind} is not a JSON value (use dict, list, str, int, float, bool or None)"
    return JSONProblem(path, message, "json_type")


_Trail = tuple[Any, str | int] | None  # (parent trail, key): a path built only when needed


def _path(trail: _Trail) -> JSONPath:
    path: list[str | int] = []
    while trail is not None:
        trail, key = trail
        path.append(key)
    return tuple(reversed(path))


def _key_problem(key: object, trail: _Trail) -> JSONProblem | None:
    if not isinstance(key, str):
        kind = type(key).__name__
        message = f"object key {key!r} is {kind}, not str (JSON object keys are strings)"
        return JSONProblem(_path(trail), message, "key_type")
    problem = string_problem(key)
    if problem is None:
        return None
    return JSONProblem(_path((trail, key)), f"the key {problem}", _string_code(key))


def _items(container: Any) -> Iterator[tuple[Any, Any]]:
    return iter(container.items() if isinstance(container, dict) else enumerate(container))


def json_problem(value: object, *, max_depth: int = MAX_JSON_DEPTH) -> JSONProblem | None:
    """The first value (depth first, in order) the server cannot store; None when all is well.

    Iterative and bounded by ``max_depth``, so any value, even a self-containing list, is
    safe; the path is assembled only for the value found. The server checks every JSON value
    it stores with this function (``assets_app.validators``), so the common case, nothing
    wrong, is one pass that allocates nothing per scalar.
    """
    if not isinstance(value, dict | list | tuple):
        return _scalar_problem(value, ())
    # (the container's items, its trail, its depth, whether it is an object)
    stack: list[tuple[Iterator[tuple[Any, Any]], _Trail, int, bool]] = [
        (_items(value), None, 1, isinstance(value, dict))
    ]
    while stack:
        items, trail, depth, is_object = stack[-1]
        for key, child in items:
            if (
                is_object
                and (type(key) is not str or _UNSTORABLE.search(key))
                and (problem := _key_problem(key, trail)) is not None
            ):
                return problem
            kind = type(child)
            if kind is str:
                if _UNSTORABLE.search(child):
                    return _scalar_problem(child, _path((trail, key)))
            elif kind is int or kind is bool or child is None:
                if (
                    kind is int
                    and child.bit_length() > _LONG_INT_BITS
                    and (problem := _scalar_problem(child, _path((trail, key)))) is not None
                ):
                    return problem
            elif isinstance(child, dict | list | tuple):
                if depth >= max_depth:
                    message = f"nested deeper than {max_depth} levels"
                    return JSONProblem(_path((trail, key)), message, "too_deep")
                stack.append((_items(child), (trail, key), depth + 1, isinstance(child, dict)))
                break  # descend; this container's remaining items come after
            elif (problem := _scalar_problem(child, ())) is not None:
                return JSONProblem(_path((trail, key)), problem.message, problem.code)
        else:
            stack.pop()
    return None


def check_json_value(value: object, *, where: str, max_depth: int = MAX_JSON_DEPTH) -> None:
    """Raise ``ValueError`` naming ``where`` and the path when the server cannot store ``value``."""
    if (problem := json_problem(value, max_depth=max_depth)) is not None:
        raise ValueError(problem.describe(where))


def dumps(value: object) -> str:
    """The wire encoding: compact, and never ``NaN``/``Infinity`` (``ValueError`` instead)."""
    return json.dumps(value, separators=(",", ":"), allow_nan=False)
