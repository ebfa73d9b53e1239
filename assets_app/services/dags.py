"""Declaring DAGs from a manifest, like Airflow's DAG processor (SPEC §6).

Manifest format (YAML, or JSON when the file name ends in ``.json``)::

    dags:
      - dag_id: asset_s3_bucket_producer     # 1-250 chars of letters, digits, _ . -
        is_paused: false                     # optional; default false on creation, kept after
        tasks:
          - task_id: produce_asset_events
            outlets: [{asset: {uri: "s3://bucket/my-task"}}]
            inlets: []
      - dag_id: asset_s3_bucket_consumer
        schedule: {asset: {uri: "s3://bucket/my-task"}}

Inlet/outlet entries and schedule leaves:

- ``{asset: {name, uri, group, extra}}``: name or uri may be given alone and is copied to the
  other; the uri is normalized with Airflow's rules (``task_sdk.definitions.Asset``);
- ``{asset_ref: {name: N}}`` or ``{asset_ref: {uri: U}}``: a reference resolved at run time;
- ``{alias: NAME}`` or ``{alias: {name: NAME, group: G}}``.

A schedule is one leaf, ``{all: [...]}``, ``{any: [...]}`` (nestable), or a plain list (all of).
It is stored in ``Dag.asset_expression`` as ``{"asset": {"name", "uri"}}``,
``{"alias": {"name"}}``, ``{"asset_ref": {"name"}}`` / ``{"asset_ref": {"uri"}}``,
``{"all": [...]}`` or ``{"any": [...]}``.

Loading fills ``dag``, ``asset`` (created; ``group``/``extra`` updated when the manifest gives
them), ``asset_alias``, the schedule/inlet/outlet reference tables and ``asset_active``.
Loading is idempotent. A DAG loaded earlier from the same file but missing now is marked stale
and loses its references; its assets stop being active unless another DAG still declares them.
A manifest that would give two active assets the same name or the same uri is rejected.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from django.db import IntegrityError, models, transaction
from django.db.models import Q
from django.utils import timezone

from assets_app.exceptions import AssetConflictError, ManifestError
from assets_app.models import (
    ID_LENGTH,
    Asset,
    AssetActive,
    AssetAlias,
    Dag,
    DagScheduleAssetAliasReference,
    DagScheduleAssetNameReference,
    DagScheduleAssetReference,
    DagScheduleAssetUriReference,
    TaskInletAssetReference,
    TaskOutletAssetReference,
)
from task_sdk.definitions import DEFAULT_GROUP, AssetNameRef, AssetUriRef, normalize_uri
from task_sdk.definitions import Asset as SdkAsset
from task_sdk.definitions import AssetAlias as SdkAssetAlias

logger = logging.getLogger(__name__)

#: Airflow's rule for dag and task ids.
KEY_PATTERN = re.compile(r"^[\w.-]+$")


# --- parsed manifest -------------------------------------------------------------------------


@dataclass(frozen=True)
class AssetDecl:
    """An asset as declared. ``group``/``extra`` are ``None`` when the manifest omits them."""

    name: str
    uri: str
    group: str | None = None
    extra: dict[str, Any] | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.name, self.uri)


@dataclass(frozen=True)
class AliasDecl:
    name: str
    group: str | None = None


#: References are the task SDK's own (``Asset.ref``); a uri reference is stored normalized.
Leaf = AssetDecl | AliasDecl | AssetNameRef | AssetUriRef


@dataclass(frozen=True)
class TaskDecl:
    task_id: str
    outlets: tuple[Leaf, ...] = ()
    inlets: tuple[Leaf, ...] = ()


@dataclass(frozen=True)
class DagDecl:
    dag_id: str
    is_paused: bool | None = None  # None: keep the stored value (False for a new DAG)
    tasks: tuple[TaskDecl, ...] = ()
    asset_expression: dict[str, Any] | None = None
    schedule_leaves: tuple[Leaf, ...] = ()


@dataclass(frozen=True)
class Manifest:
    dags: tuple[DagDecl, ...]


@dataclass(frozen=True)
class DeclareResult:
    fileloc: str
    dag_ids: list[str]
    stale_dag_ids: list[str]
    assets_created: int
    assets_updated: int
    aliases_created: int
    activated: int
    deactivated: int
    warnings: list[str] = field(default_factory=list)


# --- parsing ---------------------------------------------------------------------------------


def manifest_read(path: Path) -> Any:
    """Read the raw manifest document (JSON for ``*.json``, YAML otherwise)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ManifestError(f"{path}: no such file") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ManifestError(f"{path}: cannot read: {exc}") from exc
    try:
        if path.suffix.lower() == ".json":
            return json.loads(text)
        return yaml.safe_load(text)
    except json.JSONDecodeError as exc:
        raise ManifestError(f"{path}: invalid JSON: {exc}") from exc
    except yaml.YAMLError as exc:
        raise ManifestError(f"{path}: invalid YAML: {exc}") from exc


def _check_keys(value: Any, where: str, *, allowed: set[str], required: set[str]) -> dict:
    if not isinstance(value, dict):
        raise ManifestError(f"{where}: expected a mapping, got {type(value).__name__}")
    unknown = sorted(str(key) for key in value.keys() - allowed)
    if unknown:
        raise ManifestError(
            f"{where}: unknown key(s) {', '.join(unknown)} (allowed: {', '.join(sorted(allowed))})"
        )
    missing = sorted(required - value.keys())
    if missing:
        raise ManifestError(f"{where}: missing required key(s) {', '.join(missing)}")
    return value


def _check_id(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise ManifestError(f"{where}: must be a non-empty string")
    if len(value) > ID_LENGTH:
        raise ManifestError(f"{where}: longer than {ID_LENGTH} characters")
    if not KEY_PATTERN.match(value):
        raise ManifestError(
            f"{where}: {value!r} may only contain letters, digits, underscores, dots and dashes"
        )
    return value


def _check_extra(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ManifestError(f"{where}: extra must be a mapping")
    try:
        json.dumps(value)
    except (TypeError, ValueError) as exc:
        raise ManifestError(f"{where}: extra is not JSON-serializable: {exc}") from exc
    return value


def _parse_asset(value: Any, where: str) -> AssetDecl:
    spec = _check_keys(value, where, allowed={"name", "uri", "group", "extra"}, required=set())
    if "name" not in spec and "uri" not in spec:
        raise ManifestError(f"{where}: an asset needs a name or a uri")
    extra = _check_extra(spec["extra"], where) if "extra" in spec else None
    try:
        asset = SdkAsset(name=spec.get("name"), uri=spec.get("uri"), group=spec.get("group"))
    except (TypeError, ValueError) as exc:
        raise ManifestError(f"{where}: {exc}") from exc
    return AssetDecl(
        name=asset.name,
        uri=asset.uri,
        group=asset.group if "group" in spec else None,
        extra=extra,
    )


def _parse_alias(value: Any, where: str) -> AliasDecl:
    if isinstance(value, str):
        value = {"name": value}
    spec = _check_keys(value, where, allowed={"name", "group"}, required={"name"})
    try:
        alias = SdkAssetAlias(
            name=spec["name"], **({"group": spec["group"]} if "group" in spec else {})
        )
    except (TypeError, ValueError) as exc:
        raise ManifestError(f"{where}: {exc}") from exc
    return AliasDecl(name=alias.name, group=alias.group if "group" in spec else None)


def _parse_ref(value: Any, where: str) -> AssetNameRef | AssetUriRef:
    spec = _check_keys(value, where, allowed={"name", "uri"}, required=set())
    if len(spec) != 1:
        raise ManifestError(f"{where}: an asset_ref takes exactly one of name or uri")
    try:
        ref = SdkAsset.ref(**spec)
        if isinstance(ref, AssetUriRef):
            return AssetUriRef(normalize_uri(ref.uri))
        return ref
    except (TypeError, ValueError) as exc:
        raise ManifestError(f"{where}: {exc}") from exc


_LEAF_PARSERS = {"asset": _parse_asset, "alias": _parse_alias, "asset_ref": _parse_ref}


def _parse_leaf(node: Any, where: str) -> Leaf:
    if not isinstance(node, dict) or len(node) != 1 or next(iter(node)) not in _LEAF_PARSERS:
        raise ManifestError(
            f"{where}: expected one of {{asset: ...}}, {{asset_ref: ...}}, {{alias: ...}}"
        )
    kind, value = next(iter(node.items()))
    return _LEAF_PARSERS[kind](value, f"{where}.{kind}")


def _leaf_expression(leaf: Leaf) -> dict[str, Any]:
    if isinstance(leaf, AssetDecl):
        return {"asset": {"name": leaf.name, "uri": leaf.uri}}
    if isinstance(leaf, AliasDecl):
        return {"alias": {"name": leaf.name}}
    if isinstance(leaf, AssetNameRef):
        return {"asset_ref": {"name": leaf.name}}
    return {"asset_ref": {"uri": leaf.uri}}


def _parse_condition(node: Any, where: str, leaves: list[Leaf]) -> dict[str, Any]:
    """Parse a schedule node into its stored expression, collecting the leaves it uses."""
    if isinstance(node, list):
        node = {"all": node}
    if isinstance(node, dict) and len(node) == 1 and next(iter(node)) in ("all", "any"):
        operator, children = next(iter(node.items()))
        if not isinstance(children, list) or not children:
            raise ManifestError(f"{where}.{operator}: expected a non-empty list of conditions")
        return {
            operator: [
                _parse_condition(child, f"{where}.{operator}[{index}]", leaves)
                for index, child in enumerate(children)
            ]
        }
    if isinstance(node, dict) and len(node) == 1 and next(iter(node)) in _LEAF_PARSERS:
        leaf = _parse_leaf(node, where)
        leaves.append(leaf)
        return _leaf_expression(leaf)
    raise ManifestError(
        f"{where}: expected an asset condition ({{asset}}, {{asset_ref}}, {{alias}}, "
        "{all: [...]}, {any: [...]} or a list); only asset schedules are supported"
    )


def _parse_leaves(value: Any, where: str) -> tuple[Leaf, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ManifestError(f"{where}: expected a list")
    return tuple(_parse_leaf(node, f"{where}[{index}]") for index, node in enumerate(value))


def _parse_task(value: Any, where: str) -> TaskDecl:
    spec = _check_keys(value, where, allowed={"task_id", "outlets", "inlets"}, required={"task_id"})
    return TaskDecl(
        task_id=_check_id(spec["task_id"], f"{where}.task_id"),
        outlets=_parse_leaves(spec.get("outlets"), f"{where}.outlets"),
        inlets=_parse_leaves(spec.get("inlets"), f"{where}.inlets"),
    )


def _parse_dag(value: Any, where: str) -> DagDecl:
    spec = _check_keys(
        value, where, allowed={"dag_id", "is_paused", "tasks", "schedule"}, required={"dag_id"}
    )
    dag_id = _check_id(spec["dag_id"], f"{where}.dag_id")
    is_paused = spec.get("is_paused")
    if is_paused is not None and not isinstance(is_paused, bool):
        raise ManifestError(f"{where}.is_paused: expected true or false")
    tasks_raw = spec.get("tasks") or []
    if not isinstance(tasks_raw, list):
        raise ManifestError(f"{where}.tasks: expected a list")
    tasks = tuple(_parse_task(task, f"{where}.tasks[{i}]") for i, task in enumerate(tasks_raw))
    task_ids = [task.task_id for task in tasks]
    duplicates = sorted({task_id for task_id in task_ids if task_ids.count(task_id) > 1})
    if duplicates:
        raise ManifestError(f"{where}: duplicate task_id(s) {', '.join(duplicates)}")
    leaves: list[Leaf] = []
    expression = None
    if spec.get("schedule") is not None:
        expression = _parse_condition(spec["schedule"], f"{where}.schedule", leaves)
    return DagDecl(
        dag_id=dag_id,
        is_paused=is_paused,
        tasks=tasks,
        asset_expression=expression,
        schedule_leaves=tuple(leaves),
    )


def manifest_parse(document: Any, *, source: str = "manifest") -> Manifest:
    """Validate a raw manifest document (see the module docstring) into typed declarations."""
    spec = _check_keys(document, source, allowed={"dags"}, required={"dags"})
    if not isinstance(spec["dags"], list):
        raise ManifestError(f"{source}.dags: expected a list")
    dags = tuple(_parse_dag(dag, f"{source}.dags[{i}]") for i, dag in enumerate(spec["dags"]))
    dag_ids = [dag.dag_id for dag in dags]
    duplicates = sorted({dag_id for dag_id in dag_ids if dag_ids.count(dag_id) > 1})
    if duplicates:
        raise ManifestError(f"{source}: duplicate dag_id(s) {', '.join(duplicates)}")
    return Manifest(dags=dags)


# --- writing ---------------------------------------------------------------------------------


def _declared_leaves(manifest: Manifest) -> Iterator[Leaf]:
    """Every leaf in manifest order: each DAG's schedule, then its tasks' outlets and inlets."""
    for dag in manifest.dags:
        yield from dag.schedule_leaves
        for task in dag.tasks:
            yield from task.outlets
            yield from task.inlets


def _merge_assets(manifest: Manifest) -> dict[tuple[str, str], AssetDecl]:
    """Every declared asset by key; group/extra from whichever declaration gives them."""
    merged: dict[tuple[str, str], AssetDecl] = {}
    for leaf in _declared_leaves(manifest):
        if not isinstance(leaf, AssetDecl):
            continue
        seen = merged.get(leaf.key)
        if seen is None:
            merged[leaf.key] = leaf
            continue
        for attr in ("group", "extra"):
            mine, theirs = getattr(leaf, attr), getattr(seen, attr)
            if mine is not None and theirs is not None and mine != theirs:
                raise ManifestError(
                    f"asset (name={leaf.name!r}, uri={leaf.uri!r}) is declared with two "
                    f"different {attr} values: {theirs!r} and {mine!r}"
                )
        merged[leaf.key] = AssetDecl(
            name=leaf.name,
            uri=leaf.uri,
            group=leaf.group if leaf.group is not None else seen.group,
            extra=leaf.extra if leaf.extra is not None else seen.extra,
        )
    return merged


def _merge_aliases(manifest: Manifest) -> dict[str, AliasDecl]:
    merged: dict[str, AliasDecl] = {}
    for leaf in _declared_leaves(manifest):
        if isinstance(leaf, AliasDecl) and (leaf.name not in merged or leaf.group is not None):
            merged[leaf.name] = leaf
    return merged


def _assets_upsert(
    wanted: Mapping[tuple[str, str], AssetDecl], *, now: Any
) -> tuple[dict[tuple[str, str], int], int, int]:
    """Create missing assets and update declared group/extra; return ids by key and counts."""

    def load() -> dict[tuple[str, str], Asset]:
        names = {name for name, _ in wanted}
        uris = {uri for _, uri in wanted}
        rows = Asset.objects.filter(name__in=names, uri__in=uris)
        return {(a.name, a.uri): a for a in rows if (a.name, a.uri) in wanted}

    existing = load()
    created_keys = {key for key in wanted if key not in existing}
    missing = [
        Asset(
            name=decl.name,
            uri=decl.uri,
            group=decl.group if decl.group is not None else DEFAULT_GROUP,
            extra=decl.extra if decl.extra is not None else {},
        )
        for key, decl in wanted.items()
        if key in created_keys
    ]
    if missing:
        # ignore_conflicts: a task emitting through an alias may create the same asset meanwhile
        Asset.objects.bulk_create(missing, ignore_conflicts=True)
        existing = load()
    changed = []
    for key, decl in wanted.items():
        if key in created_keys:
            continue
        asset = existing[key]
        dirty = False
        if decl.group is not None and asset.group != decl.group:
            asset.group, dirty = decl.group, True
        if decl.extra is not None and asset.extra != decl.extra:
            asset.extra, dirty = decl.extra, True
        if dirty:
            asset.updated_at = now
            changed.append(asset)
    if changed:
        Asset.objects.bulk_update(changed, ["group", "extra", "updated_at"])
    return {key: asset.pk for key, asset in existing.items()}, len(missing), len(changed)


def _aliases_upsert(wanted: Mapping[str, AliasDecl]) -> tuple[dict[str, int], int]:
    if not wanted:
        return {}, 0
    existing = {a.name: a for a in AssetAlias.objects.filter(name__in=wanted)}
    missing = [
        AssetAlias(
            name=decl.name,
            group=decl.group if decl.group is not None else DEFAULT_GROUP,
        )
        for name, decl in wanted.items()
        if name not in existing
    ]
    if missing:
        AssetAlias.objects.bulk_create(missing, ignore_conflicts=True)
    changed = [
        alias
        for name, alias in existing.items()
        if wanted[name].group is not None and alias.group != wanted[name].group
    ]
    for alias in changed:
        alias.group = wanted[alias.name].group
    if changed:
        AssetAlias.objects.bulk_update(changed, ["group"])
    ids = dict(AssetAlias.objects.filter(name__in=wanted).values_list("name", "pk"))
    return ids, len(missing)


def _references_sync(
    model: type[models.Model],
    *,
    dag_ids: Iterable[str],
    key_fields: tuple[str, ...],
    wanted: set[tuple[Any, ...]],
) -> None:
    """Make ``model``'s rows for ``dag_ids`` exactly ``wanted`` (tuples of ``key_fields``)."""
    rows = model.objects.filter(dag_id__in=list(dag_ids)).values_list("pk", *key_fields)
    have = {tuple(row[1:]): row[0] for row in rows}
    obsolete = [pk for key, pk in have.items() if key not in wanted]
    if obsolete:
        model.objects.filter(pk__in=obsolete).delete()
    new = [dict(zip(key_fields, key, strict=True)) for key in wanted if key not in have]
    if new:
        model.objects.bulk_create([model(**values) for values in new])


_ASSET_REFERENCE_MODELS = (
    DagScheduleAssetReference,
    TaskOutletAssetReference,
    TaskInletAssetReference,
)


def _referenced_asset_ids(*, dag_ids: Iterable[str] | None, asset_ids: set[int] | None) -> set[int]:
    """Assets referenced by non-stale DAGs (optionally only ``dag_ids`` / ``asset_ids``)."""
    found: set[int] = set()
    for model in _ASSET_REFERENCE_MODELS:
        rows = model.objects.filter(dag__is_stale=False)
        if dag_ids is not None:
            rows = rows.filter(dag_id__in=list(dag_ids))
        if asset_ids is not None:
            rows = rows.filter(asset_id__in=asset_ids)
        found.update(rows.values_list("asset_id", flat=True))
    return found


def _describe(name: str, uri: str) -> str:
    return f"(name={name!r}, uri={uri!r})"


def _active_conflicts(
    to_activate: Mapping[int, tuple[str, str]], others: Mapping[int, tuple[str, str]]
) -> list[str]:
    """Name/uri clashes among the assets to activate and against the other active assets."""
    problems: list[str] = []
    by_name: dict[str, tuple[int, str, str, bool]] = {}
    by_uri: dict[str, tuple[int, str, str, bool]] = {}
    for asset_id, (name, uri) in others.items():
        by_name[name] = by_uri[uri] = (asset_id, name, uri, True)
    for asset_id, (name, uri) in sorted(to_activate.items(), key=lambda item: item[1]):
        for label, value, index in (("name", name, by_name), ("uri", uri, by_uri)):
            clash = index.get(value)
            if clash is not None and clash[0] != asset_id:
                where = " (already active)" if clash[3] else ""
                problems.append(
                    f"assets {_describe(clash[1], clash[2])}{where} and {_describe(name, uri)} "
                    f"would both be active with the same {label} {value!r}"
                )
            else:
                index[value] = (asset_id, name, uri, False)
    return problems


@transaction.atomic
def dags_declare(*, manifest: Manifest, fileloc: str) -> DeclareResult:
    """Store the manifest's DAGs and their asset references, in one transaction.

    Raises ``AssetConflictError`` (nothing written) when two active assets would share a name
    or a uri.
    """
    now = timezone.now()
    manifest_ids = [dag.dag_id for dag in manifest.dags]
    existing_dags = Dag.objects.in_bulk(manifest_ids)
    stale_ids = sorted(
        Dag.objects.filter(fileloc=fileloc, is_stale=False)
        .exclude(dag_id__in=manifest_ids)
        .values_list("dag_id", flat=True)
    )
    touched_ids = [*manifest_ids, *stale_ids]
    referenced_before = _referenced_asset_ids(dag_ids=touched_ids, asset_ids=None)

    asset_ids, assets_created, assets_updated = _assets_upsert(_merge_assets(manifest), now=now)
    alias_ids, aliases_created = _aliases_upsert(_merge_aliases(manifest))

    warnings: list[str] = []
    for dag_id, dag in existing_dags.items():
        if dag.fileloc and dag.fileloc != fileloc and not dag.is_stale:
            warnings.append(f"DAG {dag_id} moved from {dag.fileloc}")
    Dag.objects.bulk_create(
        [
            Dag(
                dag_id=decl.dag_id,
                is_paused=(
                    decl.is_paused
                    if decl.is_paused is not None
                    else (
                        existing_dags[decl.dag_id].is_paused
                        if decl.dag_id in existing_dags
                        else False
                    )
                ),
                is_stale=False,
                asset_expression=decl.asset_expression,
                task_ids=[task.task_id for task in decl.tasks],
                fileloc=fileloc,
                last_parsed_time=now,
            )
            for decl in manifest.dags
        ],
        update_conflicts=True,
        unique_fields=["dag_id"],
        update_fields=[
            "is_paused",
            "is_stale",
            "asset_expression",
            "task_ids",
            "fileloc",
            "last_parsed_time",
        ],
    )
    if stale_ids:
        Dag.objects.filter(dag_id__in=stale_ids).update(is_stale=True, last_parsed_time=now)
        logger.info("marked %d DAG(s) stale: %s", len(stale_ids), ", ".join(stale_ids))

    schedule_assets, schedule_aliases, name_refs, uri_refs = set(), set(), set(), set()
    outlets, inlets = set(), set()
    for decl in manifest.dags:
        for leaf in decl.schedule_leaves:
            if isinstance(leaf, AssetDecl):
                schedule_assets.add((decl.dag_id, asset_ids[leaf.key]))
            elif isinstance(leaf, AliasDecl):
                schedule_aliases.add((decl.dag_id, alias_ids[leaf.name]))
            elif isinstance(leaf, AssetNameRef):
                name_refs.add((decl.dag_id, leaf.name))
            else:
                uri_refs.add((decl.dag_id, leaf.uri))
        for task in decl.tasks:
            for target, declared in ((outlets, task.outlets), (inlets, task.inlets)):
                target.update(
                    (decl.dag_id, task.task_id, asset_ids[leaf.key])
                    for leaf in declared
                    if isinstance(leaf, AssetDecl)
                )
    for model, key_fields, wanted in (
        (DagScheduleAssetReference, ("dag_id", "asset_id"), schedule_assets),
        (DagScheduleAssetAliasReference, ("dag_id", "alias_id"), schedule_aliases),
        (DagScheduleAssetNameReference, ("dag_id", "name"), name_refs),
        (DagScheduleAssetUriReference, ("dag_id", "uri"), uri_refs),
        (TaskOutletAssetReference, ("dag_id", "task_id", "asset_id"), outlets),
        (TaskInletAssetReference, ("dag_id", "task_id", "asset_id"), inlets),
    ):
        _references_sync(model, dag_ids=touched_ids, key_fields=key_fields, wanted=wanted)

    # Active assets: everything this manifest declares, minus what only this file's DAGs
    # declared before and no non-stale DAG declares any more.
    declared_ids = set(asset_ids.values())
    still_referenced = _referenced_asset_ids(dag_ids=None, asset_ids=referenced_before)
    lost_ids = referenced_before - still_referenced - declared_ids
    keys_by_id = {pk: key for key, pk in asset_ids.items()}
    nearby = AssetActive.objects.filter(
        Q(name__in={name for name, _ in asset_ids}) | Q(uri__in={uri for _, uri in asset_ids})
    ).values_list("asset_id", "name", "uri")
    others = {
        pk: (name, uri) for pk, name, uri in nearby if pk not in lost_ids and pk not in declared_ids
    }
    problems = _active_conflicts(keys_by_id, others)
    if problems:
        raise AssetConflictError("; ".join(problems))

    deactivated = 0
    if lost_ids:
        deactivated, _ = AssetActive.objects.filter(asset_id__in=lost_ids).delete()
    already_active = set(
        AssetActive.objects.filter(asset_id__in=declared_ids).values_list("asset_id", flat=True)
    )
    new_active = [
        AssetActive(asset_id=pk, name=keys_by_id[pk][0], uri=keys_by_id[pk][1])
        for pk in sorted(declared_ids - already_active)
    ]
    AssetActive.objects.bulk_create(new_active)

    result = DeclareResult(
        fileloc=fileloc,
        dag_ids=manifest_ids,
        stale_dag_ids=stale_ids,
        assets_created=assets_created,
        assets_updated=assets_updated,
        aliases_created=aliases_created,
        activated=len(new_active),
        deactivated=deactivated,
        warnings=warnings,
    )
    transaction.on_commit(
        lambda: logger.info(
            "declared %d DAG(s) from %s (%d stale)", len(manifest_ids), fileloc, len(stale_ids)
        )
    )
    return result


def dags_declare_from_file(*, path: Path | str) -> DeclareResult:
    """Read, validate and store a manifest; ``Dag.fileloc`` is the file's resolved path."""
    resolved = Path(path).expanduser().resolve()
    manifest = manifest_parse(manifest_read(resolved), source=str(resolved.name))
    try:
        return dags_declare(manifest=manifest, fileloc=str(resolved))
    except IntegrityError as exc:
        # only a concurrent writer (another declare_dags) can get here; nothing was written
        raise ManifestError(
            f"{resolved}: a concurrent change conflicted with this load ({exc}); run it again"
        ) from exc


@transaction.atomic
def dags_set_paused(*, dag_ids: Iterable[str], is_paused: bool) -> int:
    """Pause or unpause DAGs; returns how many rows changed."""
    return (
        Dag.objects.filter(dag_id__in=list(dag_ids))
        .exclude(is_paused=is_paused)
        .update(is_paused=is_paused)
    )
