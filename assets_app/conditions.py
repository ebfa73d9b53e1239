"""Asset schedule conditions: their one grammar, the stored form, and evaluating them.

Pure Python (no database), so the scheduler's decision logic is unit-testable on its own. This
module owns the grammar of conditions, which the manifest's ``schedule`` (and its inlets and
outlets, for leaves) and the stored ``Dag.asset_expression`` share (:func:`condition_parse`,
:func:`leaf_parse`), the stored form (:func:`condition_expression`, which
:func:`condition_parse` reads back unchanged) and its one-line summary
(:func:`condition_summary`).

The grammar (JSON, or the same in YAML)::

    {"asset": {"name": N, "uri": U, "group": G, "extra": {...}}}   name or uri may be alone
    {"alias": {"name": N, "group": G}}   or   {"alias": N}
    {"asset_ref": {"name": N}}   or   {"asset_ref": {"uri": U}}
    {"all": [node, ...]}   or   {"any": [node, ...]}   or   [node, ...]   (all of)

as Airflow 3 builds its ``Asset``, ``AssetAlias``, ``Asset.ref``, ``AssetAll`` and
``AssetAny`` (a list is its ``schedule=[...]``): a name or uri given alone is copied to the
other, a uri is normalized by Airflow's rules (``task_sdk.definitions.Asset``), and every
name is checked by them. ``group`` and ``extra`` declare the asset or alias (the manifest
upserts them); a condition names an asset by its key only. A tree is kept as written: an
``all``/``any`` of one child, nested ones and a leaf given twice are not folded (Airflow keeps
``AssetAll(a)``, ``AssetAll(AssetAny(a))`` and ``AssetAll(a, a)`` so, and serializes them as
``{"all": [...]}``). An empty ``all``/``any`` is accepted, as Airflow accepts ``AssetAll()`` /
``AssetAny()`` and ``schedule=[]``. Anything else is refused with an
:class:`InvalidAssetExpression` whose message starts with the place: ``where`` (the manifest
passes ``dags.yaml.dags[0].schedule``, a stored expression is ``asset_expression``), then the
path to the node (``.any[1].asset``).

Semantics (as Airflow 3's ``AssetEvaluator`` evaluates them):

- an asset is satisfied when the caller says so (the scheduler: "it has a queue row");
- an alias is satisfied when **any** asset it resolves to is satisfied; an alias that has not
  resolved to any asset yet is *not* satisfied (Airflow: ``any()`` over no assets);
- a ref is satisfied when the asset it names (the *active* asset with that name / uri) is
  satisfied; a ref that names no active asset is not satisfied;
- ``all`` needs every child, ``any`` needs one: Python's ``all()`` and ``any()``, so an empty
  ``all`` is satisfied and an empty ``any`` is not (Airflow's ``agg_func``). A condition that
  names no asset is still never met in practice: nothing queues its DAG, and a run is created
  only for events to consume.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import chain
from typing import Any

from assets_app.exceptions import InvalidAssetExpression
from assets_app.validators import validate_keys, value_describe
from task_sdk.definitions import Asset as SdkAsset
from task_sdk.definitions import AssetAlias as SdkAssetAlias
from task_sdk.definitions import (
    AssetAliasUniqueKey,
    AssetNameRef,
    AssetUniqueKey,
    AssetUriRef,
    normalize_uri,
)


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

#: The operators of a condition and the kinds of its leaves: a node's one key.
OPERATORS = ("all", "any")
LEAF_KINDS = ("asset", "asset_ref", "alias")
#: What a node may be, as the messages say it.
LEAF_FORMS = "{asset: ...}, {asset_ref: ...}, {alias: ...}"
CONDITION_FORMS = f"{LEAF_FORMS}, {{all: [...]}}, {{any: [...]}} or a list"


@dataclass(frozen=True)
class DeclaredLeaf:
    """A leaf as written, with what it declares besides its key: an asset's ``group`` and
    ``extra``, an alias's ``group`` (``None`` where not given)."""

    leaf: Leaf
    group: str | None = None
    extra: dict[str, Any] | None = None


def node_kind(node: Any) -> Any:
    """The one key of a one-key mapping (a node's kind), ``None`` for anything else."""
    # a dict first: the stored form is decoded JSON, and ``Mapping``'s check is slow
    if (type(node) is dict or isinstance(node, Mapping)) and len(node) == 1:
        return next(iter(node))
    return None


def condition_parse(
    expression: Any,
    *,
    where: str = "asset_expression",
    declared: list[DeclaredLeaf] | None = None,
) -> Condition:
    """Parse a condition (see the module docstring) into its tree; raises
    :class:`InvalidAssetExpression` naming the place, which starts with ``where``.
    ``declared``, if given, receives every leaf with what it declares, in the order written."""
    if isinstance(expression, list):
        return AllOf(_children(expression, where, declared))
    kind = node_kind(expression)
    if kind in OPERATORS:
        children = expression[kind]
        if not isinstance(children, list):
            raise InvalidAssetExpression(
                f"{where}.{kind}: expected a list of conditions, got {value_describe(children)}"
            )
        parsed = _children(children, f"{where}.{kind}", declared)
        return AllOf(parsed) if kind == "all" else AnyOf(parsed)
    if kind in LEAF_KINDS:
        leaf = _leaf(kind, expression[kind], where)
        if declared is not None:
            declared.append(leaf)
        return leaf.leaf
    got = value_describe(expression)
    raise InvalidAssetExpression(
        f"{where}: expected an asset condition ({CONDITION_FORMS}), got {got}"
    )


def _children(
    nodes: list[Any], where: str, declared: list[DeclaredLeaf] | None
) -> tuple[Condition, ...]:
    return tuple(
        condition_parse(node, where=f"{where}[{index}]", declared=declared)
        for index, node in enumerate(nodes)
    )


def leaf_parse(node: Any, *, where: str) -> DeclaredLeaf:
    """One leaf (an inlet, an outlet, or a condition's leaf): ``{asset: ...}``,
    ``{asset_ref: ...}`` or ``{alias: ...}``; raises :class:`InvalidAssetExpression`."""
    kind = node_kind(node)
    if kind not in LEAF_KINDS:
        raise InvalidAssetExpression(f"{where}: expected one of {LEAF_FORMS}")
    return _leaf(kind, node[kind], where)


def _leaf(kind: str, body: Any, where: str) -> DeclaredLeaf:
    where = f"{where}.{kind}"
    if kind == "asset":
        return _asset(body, where)
    if kind == "alias":
        return _alias(body, where)
    return DeclaredLeaf(_ref(body, where))


def _body(
    value: Any, where: str, *, allowed: tuple[str, ...], required: tuple[str, ...] = ()
) -> Mapping[str, Any]:
    try:
        return validate_keys(value, allowed=allowed, required=required)
    except ValueError as exc:
        raise InvalidAssetExpression(f"{where}: {exc}") from exc


def _asset(body: Any, where: str) -> DeclaredLeaf:
    spec = _body(body, where, allowed=("name", "uri", "group", "extra"))
    if "name" not in spec and "uri" not in spec:
        raise InvalidAssetExpression(f"{where}: an asset needs a name or a uri")
    extra = spec.get("extra")
    if "extra" in spec:
        if not isinstance(extra, dict):
            raise InvalidAssetExpression(f"{where}: extra must be a mapping")
        try:
            json.dumps(extra)
        except (TypeError, ValueError) as exc:
            raise InvalidAssetExpression(f"{where}: extra is not JSON-serializable: {exc}") from exc
    try:
        fields = (spec.get("name"), spec.get("uri"), spec.get("group"))
        try:
            key, group = _asset_key(*fields)
        except TypeError:  # a field that is no string (unhashable): refused by the rules below
            key, group = _asset_key.__wrapped__(*fields)
    except (TypeError, ValueError) as exc:
        raise InvalidAssetExpression(f"{where}: {exc}") from exc
    return DeclaredLeaf(key, group=group if "group" in spec else None, extra=extra)


@lru_cache(maxsize=65536)
def _asset_key(name: Any, uri: Any, group: Any) -> tuple[AssetUniqueKey, str]:
    """An asset's key and group by Airflow's rules (``task_sdk.definitions.Asset``: checked
    names, a normalized uri): a pure function, remembered, because every DAG's stored condition
    names its assets again (a scheduler's first pass reads thousands). A refusal is not
    remembered: it raises each time."""
    asset = SdkAsset(name=name, uri=uri, group=group)
    return AssetUniqueKey(name=asset.name, uri=asset.uri), asset.group


def _alias(body: Any, where: str) -> DeclaredLeaf:
    spec = _body(
        {"name": body} if isinstance(body, str) else body,
        where,
        allowed=("name", "group"),
        required=("name",),
    )
    try:
        alias = SdkAssetAlias(
            name=spec["name"], **({"group": spec["group"]} if "group" in spec else {})
        )
    except (TypeError, ValueError) as exc:
        raise InvalidAssetExpression(f"{where}: {exc}") from exc
    return DeclaredLeaf(
        AssetAliasUniqueKey(name=alias.name), group=alias.group if "group" in spec else None
    )


def _ref(body: Any, where: str) -> AssetNameRef | AssetUriRef:
    spec = _body(body, where, allowed=("name", "uri"))
    if len(spec) != 1:
        raise InvalidAssetExpression(f"{where}: an asset_ref takes exactly one of name or uri")
    try:
        ref = SdkAsset.ref(**spec)
        if isinstance(ref, AssetUriRef):
            return AssetUriRef(normalize_uri(ref.uri))
        return ref
    except (TypeError, ValueError) as exc:
        raise InvalidAssetExpression(f"{where}: {exc}") from exc


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
    """One line for people: ``a & (b | alias:c)``; an asset shows its name, an empty
    ``all``/``any`` reads ``all()``/``any()``."""
    if isinstance(condition, AllOf | AnyOf):
        if not condition.children:
            return "all()" if isinstance(condition, AllOf) else "any()"
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
    """Evaluate the tree; ``leaf_satisfied`` decides each leaf (an empty ``all`` holds, an
    empty ``any`` does not: Airflow's ``all()`` / ``any()``)."""
    if isinstance(condition, AllOf):
        return all(
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
