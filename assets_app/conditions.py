"""Asset schedule conditions: parsing ``Dag.asset_expression`` and evaluating it.

Pure Python (no database), so the scheduler's decision logic is unit-testable on its own. This
module owns the stored format in both directions (:func:`condition_parse`,
:func:`condition_expression`) and its one-line summary (:func:`condition_summary`).

The JSON form, as written by ``declare_dags``::

    {"asset": {"name": N, "uri": U}}
    {"alias": {"name": N}}
    {"asset_ref": {"name": N}}   or   {"asset_ref": {"uri": U}}
    {"all": [node, ...]}         or   {"any": [node, ...]}

Semantics (as Airflow 3 evaluates ``AssetAll`` / ``AssetAny`` / ``AssetAlias`` / asset refs):

- an asset is satisfied when the caller says so (the scheduler: "it has a queue row");
- an alias is satisfied when **any** asset it resolves to is satisfied; an alias that has not
  resolved to any asset yet is *not* satisfied (Airflow: ``any()`` over no assets);
- a ref is satisfied when the asset it names (the *active* asset with that name / uri) is
  satisfied; a ref that names no active asset is not satisfied;
- ``all`` needs every child, ``any`` needs one. An empty ``all`` or ``any`` is *not*
  satisfied: a DAG is never triggered on nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

from assets_app.exceptions import InvalidAssetExpression
from task_sdk.definitions import AssetAliasUniqueKey, AssetNameRef, AssetUniqueKey, AssetUriRef


@dataclass(frozen=True)
class AllOf:
    children: tuple[Condition, ...]


@dataclass(frozen=True)
class AnyOf:
    children: tuple[Condition, ...]


#: A leaf names an asset by its key, an alias, or a reference by name or uri (the task SDK's
#: own types, so a key means the same thing on both sides of the wire).
Leaf = AssetUniqueKey | AssetAliasUniqueKey | AssetNameRef | AssetUriRef
Condition = Leaf | AllOf | AnyOf


def _text(value: Any, *, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidAssetExpression(f"{where} must be a non-empty string, got {value!r}")
    return value


def condition_parse(expression: Any) -> Condition:
    """Parse the JSON form into a condition tree; raises :class:`InvalidAssetExpression`."""
    if not isinstance(expression, Mapping) or len(expression) != 1:
        raise InvalidAssetExpression(f"expected an object with exactly one key, got {expression!r}")
    ((kind, body),) = expression.items()
    if kind in ("all", "any"):
        if not isinstance(body, list):
            raise InvalidAssetExpression(f"{kind!r} must hold a list, got {body!r}")
        children = tuple(condition_parse(child) for child in body)
        return AllOf(children) if kind == "all" else AnyOf(children)
    if not isinstance(body, Mapping):
        raise InvalidAssetExpression(f"{kind!r} must hold an object, got {body!r}")
    if kind == "asset":
        name = _text(body.get("name"), where="asset name")
        uri = _text(body.get("uri", name), where="asset uri")
        return AssetUniqueKey(name=name, uri=uri)
    if kind == "alias":
        return AssetAliasUniqueKey(name=_text(body.get("name"), where="alias name"))
    if kind == "asset_ref":
        try:
            if "name" in body and "uri" not in body:
                return AssetNameRef(_text(body["name"], where="asset_ref name"))
            if "uri" in body and "name" not in body:
                return AssetUriRef(_text(body["uri"], where="asset_ref uri"))
        except ValueError as exc:  # the reference's own rules (e.g. not just whitespace)
            raise InvalidAssetExpression(f"asset_ref: {exc}") from exc
        raise InvalidAssetExpression(f"asset_ref needs exactly one of name / uri, got {body!r}")
    raise InvalidAssetExpression(f"unknown condition node {kind!r}")


def condition_expression(condition: Condition) -> dict[str, Any]:
    """The stored JSON form of a condition (the inverse of :func:`condition_parse`)."""
    if isinstance(condition, AllOf | AnyOf):
        operator = "all" if isinstance(condition, AllOf) else "any"
        return {operator: [condition_expression(child) for child in condition.children]}
    if isinstance(condition, AssetUniqueKey):
        return {"asset": {"name": condition.name, "uri": condition.uri}}
    if isinstance(condition, AssetAliasUniqueKey):
        return {"alias": {"name": condition.name}}
    if isinstance(condition, AssetNameRef):
        return {"asset_ref": {"name": condition.name}}
    return {"asset_ref": {"uri": condition.uri}}


def condition_summary(condition: Condition) -> str:
    """One line for people: ``a & (b | alias:c)``; an asset shows its name."""
    if isinstance(condition, AllOf | AnyOf):
        separator = " & " if isinstance(condition, AllOf) else " | "
        parts = [condition_summary(child) for child in condition.children]
        return separator.join(
            f"({part})" if (" & " in part or " | " in part) else part for part in parts
        )
    if isinstance(condition, AssetUniqueKey):
        return condition.name
    if isinstance(condition, AssetAliasUniqueKey):
        return f"alias:{condition.name}"
    if isinstance(condition, AssetNameRef):
        return f"name-ref:{condition.name}"
    return f"uri-ref:{condition.uri}"


@dataclass(frozen=True)
class ConditionReferences:
    """Everything some conditions (or a task's outlets, as leaves) mention, grouped by kind
    for bulk lookups: each group de-duplicated, in the order first mentioned."""

    asset_keys: tuple[AssetUniqueKey, ...] = ()
    alias_names: tuple[str, ...] = ()
    name_refs: tuple[str, ...] = ()
    uri_refs: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.asset_keys or self.alias_names or self.name_refs or self.uri_refs)

    @staticmethod
    def union(parts: Iterable[ConditionReferences]) -> ConditionReferences:
        """What ``parts`` mention together, in order: ``condition_references(*conditions)``
        from each condition's own references, without walking the trees again."""
        parts = list(parts)
        return ConditionReferences(
            asset_keys=tuple(dict.fromkeys(chain.from_iterable(p.asset_keys for p in parts))),
            alias_names=tuple(dict.fromkeys(chain.from_iterable(p.alias_names for p in parts))),
            name_refs=tuple(dict.fromkeys(chain.from_iterable(p.name_refs for p in parts))),
            uri_refs=tuple(dict.fromkeys(chain.from_iterable(p.uri_refs for p in parts))),
        )


def condition_references(*conditions: Condition) -> ConditionReferences:
    """Everything the given conditions mention, together (one bulk lookup for many DAGs),
    in the order they mention it (depth first, left to right)."""
    asset_keys: dict[AssetUniqueKey, None] = {}
    alias_names: dict[str, None] = {}
    name_refs: dict[str, None] = {}
    uri_refs: dict[str, None] = {}
    stack: list[Condition] = list(reversed(conditions))
    while stack:
        node = stack.pop()
        if isinstance(node, AllOf | AnyOf):
            stack.extend(reversed(node.children))
        elif isinstance(node, AssetUniqueKey):
            asset_keys[node] = None
        elif isinstance(node, AssetAliasUniqueKey):
            alias_names[node.name] = None
        elif isinstance(node, AssetNameRef):
            name_refs[node.name] = None
        else:
            uri_refs[node.uri] = None
    return ConditionReferences(
        asset_keys=tuple(asset_keys),
        alias_names=tuple(alias_names),
        name_refs=tuple(name_refs),
        uri_refs=tuple(uri_refs),
    )


@dataclass(frozen=True)
class Resolution:
    """How a condition's leaves map to asset ids (looked up by the caller).

    A key missing from a mapping means "resolves to nothing".
    """

    asset_ids: Mapping[AssetUniqueKey, int] = field(default_factory=dict)
    alias_asset_ids: Mapping[str, Collection[int]] = field(default_factory=dict)
    name_ref_ids: Mapping[str, int] = field(default_factory=dict)
    uri_ref_ids: Mapping[str, int] = field(default_factory=dict)

    def leaf_asset_ids(self, leaf: Leaf) -> Collection[int]:
        """The asset ids a leaf stands for (empty when it resolves to nothing)."""
        found: int | None
        if isinstance(leaf, AssetAliasUniqueKey):
            return self.alias_asset_ids.get(leaf.name, ())
        if isinstance(leaf, AssetUniqueKey):
            found = self.asset_ids.get(leaf)
        elif isinstance(leaf, AssetNameRef):
            found = self.name_ref_ids.get(leaf.name)
        else:
            found = self.uri_ref_ids.get(leaf.uri)
        return () if found is None else (found,)

    def direct_asset_ids(self) -> set[int]:
        """The assets named by an asset leaf or a ref (not through an alias)."""
        ids = set(self.asset_ids.values()) | set(self.name_ref_ids.values())
        return ids | set(self.uri_ref_ids.values())

    def all_asset_ids(self) -> set[int]:
        """The direct assets and every asset an alias resolves to."""
        ids = self.direct_asset_ids()
        for alias_ids in self.alias_asset_ids.values():
            ids |= set(alias_ids)
        return ids


def condition_evaluate(condition: Condition, *, leaf_satisfied: Callable[[Leaf], bool]) -> bool:
    """Evaluate the tree; ``leaf_satisfied`` decides each leaf."""
    if isinstance(condition, AllOf):
        return bool(condition.children) and all(
            condition_evaluate(child, leaf_satisfied=leaf_satisfied) for child in condition.children
        )
    if isinstance(condition, AnyOf):
        return any(
            condition_evaluate(child, leaf_satisfied=leaf_satisfied) for child in condition.children
        )
    return leaf_satisfied(condition)


def condition_is_met(
    condition: Condition, *, resolution: Resolution, ready_asset_ids: Collection[int]
) -> bool:
    """True when the condition holds with "asset id in ``ready_asset_ids``" as the leaf test.

    An alias is ready when any asset it resolves to is ready; a ref when its asset is ready.
    """
    ready = set(ready_asset_ids)

    def leaf_satisfied(leaf: Leaf) -> bool:
        return any(asset_id in ready for asset_id in resolution.leaf_asset_ids(leaf))

    return condition_evaluate(condition, leaf_satisfied=leaf_satisfied)
