"""Dynamic task mapping's length grammar (Airflow 3.3's ``expandinput`` and ``xcom_arg``
lengths), a pure module: how many map indexes a mapped task expands into, given how many
values each upstream it maps over pushed.

A mapped task is declared with ``{"length": <expression>, "group": <mapped group or None>}``
(``DagTask.mapped``; the loader writes it from ``.expand`` / ``.expand_kwargs`` / a mapped
task group, ``runtime/dag_parse.py``). An expression is:

- a whole number ``n``: a literal list or dict of ``n`` values (``.expand(x=[1, 2, 3])``);
- ``{"xcom": "<task id>"}``: the values that task pushed as its return value (an unmapped
  task's ``mapped_length``, a mapped task's count of map indexes that pushed one: Airflow's
  "second order" mapping); ``.map(f)`` over it has the same length;
- ``{"product": [e, …]}``: ``.expand(a=…, b=…)``'s cross product, and a mapped task inside
  mapped task groups (each group's length times its own);
- ``{"zip": [e, …], "fill": bool}``: ``.zip`` (the shortest; the longest with a fill value);
- ``{"concat": [e, …]}``: ``.concat`` (the sum).

:func:`length_check` refuses a malformed one with the path of the bad part;
:func:`length_evaluate` computes one, or ``None`` while an upstream it reads has not pushed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

from django.conf import settings

_LISTS = ("product", "zip", "concat")


def max_map_length() -> int:
    """The most map indexes one task may expand into (``MAX_MAP_LENGTH``, Airflow's
    ``[core] max_map_length``)."""
    return int(settings.MAX_MAP_LENGTH)


class MappingSpecError(ValueError):
    """A mapped task's declaration that is not the grammar's, with the path of the bad part."""


def mapped_check(value: Any, where: str) -> dict[str, Any]:
    """A task's ``mapped`` declaration, checked: ``{"length": e, "group": str | None}``."""
    if not isinstance(value, dict) or set(value) - {"length", "group"} or "length" not in value:
        raise MappingSpecError(
            f'{where}: expected {{"length": <expression>, "group": <group id or null>}}'
        )
    group = value.get("group")
    if group is not None and (not isinstance(group, str) or not group):
        raise MappingSpecError(f"{where}.group: expected a task group id or null")
    length_check(value["length"], f"{where}.length")
    return {"length": value["length"], "group": group}


def length_check(expression: Any, where: str) -> None:
    """Refuse an expression that is not the grammar's (``MappingSpecError`` naming where)."""
    if isinstance(expression, bool):
        raise MappingSpecError(f"{where}: expected a length expression, not a boolean")
    if isinstance(expression, int):
        if expression < 0:
            raise MappingSpecError(f"{where}: a literal length cannot be negative")
        return
    if not isinstance(expression, dict) or len(set(expression) - {"fill"}) != 1:
        raise MappingSpecError(
            f"{where}: expected a whole number or one of xcom, product, zip, concat"
        )
    (kind,) = set(expression) - {"fill"}
    if "fill" in expression and (kind != "zip" or not isinstance(expression["fill"], bool)):
        raise MappingSpecError(f"{where}.fill: only a zip has one, and it is true or false")
    if kind == "xcom":
        if not isinstance(expression["xcom"], str) or not expression["xcom"]:
            raise MappingSpecError(f"{where}.xcom: expected the task id it maps over")
        return
    if kind not in _LISTS:
        raise MappingSpecError(f"{where}: unknown kind {kind!r}; one of xcom, product, zip, concat")
    args = expression[kind]
    if not isinstance(args, list) or not args:
        raise MappingSpecError(f"{where}.{kind}: expected a non-empty list of expressions")
    for index, arg in enumerate(args):
        length_check(arg, f"{where}.{kind}[{index}]")


def length_upstreams(expression: Any) -> Iterator[str]:
    """The task ids whose pushed values the expression reads."""
    if isinstance(expression, dict):
        if "xcom" in expression:
            yield expression["xcom"]
        for kind in _LISTS:
            for arg in expression.get(kind, ()):
                yield from length_upstreams(arg)


def length_evaluate(expression: Any, pushed: Callable[[str], int | None]) -> int | None:
    """How many map indexes: ``pushed(task_id)`` is how many values that upstream pushed
    (``None``: not known, e.g. it pushed nothing), which leaves the whole length ``None``."""
    if isinstance(expression, int):
        return expression
    if "xcom" in expression:
        return pushed(expression["xcom"])
    (kind,) = set(expression) - {"fill"}
    lengths = [length_evaluate(arg, pushed) for arg in expression[kind]]
    known = [length for length in lengths if length is not None]
    if len(known) != len(lengths):
        return None
    if kind == "product":
        return math.prod(known)
    if kind == "concat":
        return sum(known)
    return max(known) if expression.get("fill") else min(known)
