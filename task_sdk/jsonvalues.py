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
from dataclasses import dataclass

#: Deepest nesting of objects and lists the server stores (the outermost one is level 1).
MAX_JSON_DEPTH = 64

_SURROGATE = re.compile("[\ud800-\udfff]")
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


def _scalar_problem(value: object) -> str | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, str):
        return string_problem(value)
    if isinstance(value, int):
        if value.bit_length() > _LONG_INT_BITS:
            try:
                int.__repr__(value)
            except ValueError:
                limit = sys.get_int_max_str_digits()
                return f"an integer with more than {limit} digits cannot be written as JSON"
        return None
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN is not valid JSON"
        if math.isinf(value):
            return f"{'-' if value < 0 else ''}Infinity is not valid JSON"
        return None
    kind = type(value).__name__
    return f"{kind} is not a JSON value (use dict, list, str, int, float, bool or None)"


def _problem(value: object, path: JSONPath, depth: int, max_depth: int) -> JSONProblem | None:
    if isinstance(value, dict):
        if depth > max_depth:
            return JSONProblem(path, f"nested deeper than {max_depth} levels")
        for key, item in value.items():
            if not isinstance(key, str):
                return JSONProblem(
                    path,
                    f"object key {key!r} is {type(key).__name__}, not str "
                    "(JSON object keys are strings)",
                )
            if (message := string_problem(key)) is not None:
                return JSONProblem((*path, key), f"the key {message}")
            if problem := _problem(item, (*path, key), depth + 1, max_depth):
                return problem
        return None
    if isinstance(value, list | tuple):
        if depth > max_depth:
            return JSONProblem(path, f"nested deeper than {max_depth} levels")
        for index, item in enumerate(value):
            if problem := _problem(item, (*path, index), depth + 1, max_depth):
                return problem
        return None
    message = _scalar_problem(value)
    return JSONProblem(path, message) if message is not None else None


def json_problem(value: object, *, max_depth: int = MAX_JSON_DEPTH) -> JSONProblem | None:
    """The first value (depth first, in order) the server cannot store; None when all is well.

    Recursion is bounded by ``max_depth``, so any value, even a self-containing list, is safe.
    """
    return _problem(value, (), 1, max_depth)


def check_json_value(value: object, *, where: str, max_depth: int = MAX_JSON_DEPTH) -> None:
    """Raise ``ValueError`` naming ``where`` and the path when the server cannot store ``value``."""
    if (problem := json_problem(value, max_depth=max_depth)) is not None:
        raise ValueError(problem.describe(where))


def dumps(value: object) -> str:
    """The wire encoding: compact, and never ``NaN``/``Infinity`` (``ValueError`` instead)."""
    return json.dumps(value, separators=(",", ":"), allow_nan=False)
