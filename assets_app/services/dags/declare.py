"""Declaring DAGs from a manifest, like Airflow's DAG processor, and pausing them
(docs/manifest.md).

``assets_app.services.dags.manifest`` reads and validates a manifest (its format is documented
there); this module stores it. The schedule is stored in ``Dag.asset_expression`` in the form
``assets_app.conditions`` defines (``condition_expression``).

Loading fills ``dag``, ``asset`` (created; ``group``/``extra`` updated when the manifest gives
them), ``asset_alias``, the schedule/inlet/outlet reference tables and ``asset_active``, in one
transaction. Loading is idempotent. A DAG loaded earlier from the same file but missing now is
marked stale and loses its references; its assets stop being active unless another DAG still
declares them. A manifest that would give two active assets the same name or the same uri is
rejected.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

from django.db import IntegrityError, models, transaction
from django.db.models import Q
from django.utils import timezone

from assets_app.conditions import Leaf, condition_expression, condition_references
from assets_app.exceptions import AssetConflictError, ManifestError
from assets_app.models import (
    Asset,
    AssetActive,
    AssetAlias,
    Dag,
    DagScheduleAssetAliasReference,
    DagScheduleAssetNameReference,
    DagScheduleAssetReference,
    DagScheduleAssetUriReference,
    DagTask,
    TaskInletAssetReference,
    TaskLeafReference,
    TaskOutletAssetReference,
)
from assets_app.params import params_dump
from assets_app.services.audit import Actor, event_logs_record
from assets_app.services.dags.code import dag_code_store
from assets_app.services.dags.manifest import (
    TASK_SETTINGS,
    AliasDecl,
    AssetDecl,
    DagDecl,
    Manifest,
    asset_describe,
    manifest_load,
)
from assets_app.services.runs.watchers import asset_watchers_sync
from assets_app.services.scheduling.time_schedules import dags_next_run_refresh
from assets_app.services.state.state_stores import asset_states_forget
from task_sdk.definitions import (
    DEFAULT_GROUP,
    AssetAliasUniqueKey,
    AssetNameRef,
    AssetUniqueKey,
    AssetUriRef,
)

logger = logging.getLogger(__name__)

#: The steps of a load, in order; a ``progress`` callback is called with each as it starts.
DECLARE_STEPS = (
    "reading the manifest",
    "assets",
    "aliases",
    "DAGs",
    "tasks",
    "references",
    "active assets",
)
DeclareProgress = Callable[[str], None]


def _no_progress(step: str) -> None:
    pass


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


def dags_declare_from_file(
    *, path: Path | str, progress: DeclareProgress | None = None
) -> DeclareResult:
    """Read, validate and store a manifest; ``Dag.fileloc`` is the file's resolved path.

    ``progress`` is called with each of :data:`DECLARE_STEPS` as it starts."""
    resolved = Path(path).expanduser().resolve()
    (progress or _no_progress)(DECLARE_STEPS[0])
    manifest = manifest_load(resolved)
    source = resolved.read_text(encoding="utf-8", errors="replace")  # read: it just loaded
    try:
        with transaction.atomic():
            dag_code_store(fileloc=str(resolved), source=source)
            return dags_declare(manifest=manifest, fileloc=str(resolved), progress=progress)
    except IntegrityError as exc:
        # only a concurrent writer (another declare_dags) can get here; nothing was written
        raise ManifestError(
            f"{resolved}: a concurrent change conflicted with this load ({exc}); run it again"
        ) from exc


@transaction.atomic
def dags_declare(
    *, manifest: Manifest, fileloc: str, progress: DeclareProgress | None = None
) -> DeclareResult:
    """Store the manifest's DAGs and their asset references, in one transaction.

    Raises ``AssetConflictError`` (nothing written) when two active assets would share a name
    or a uri. ``progress`` is called with each of :data:`DECLARE_STEPS` after the first.
    """
    step = progress or _no_progress
    now = timezone.now()
    dag_ids = [dag.dag_id for dag in manifest.dags]
    existing = Dag.objects.in_bulk(dag_ids)
    stale_ids = _stale_dag_ids(fileloc=fileloc, kept=dag_ids)
    touched_ids = [*dag_ids, *stale_ids]
    referenced_before = _referenced_asset_ids(dag_ids=touched_ids)

    step("assets")
    assets = _assets_upsert(manifest.assets, now=now)
    step("aliases")
    aliases = _aliases_upsert(manifest.aliases)
    step("DAGs")
    _dags_upsert(manifest.dags, existing=existing, fileloc=fileloc, now=now)
    step("tasks")
    _dag_tasks_sync(manifest.dags)
    _dags_mark_stale(stale_ids, now=now)
    step("references")
    _references_sync(
        manifest.dags, dag_ids=touched_ids, asset_ids=assets.ids, alias_ids=aliases.ids
    )
    step("active assets")
    activated, deactivated = _active_assets_sync(
        asset_ids=assets.ids, referenced_before=referenced_before
    )

    dags_next_run_refresh(dag_ids=dag_ids, now=now)
    asset_watchers_sync()

    transaction.on_commit(
        lambda: logger.info(
            "declared %d DAG(s) from %s (%d stale)", len(dag_ids), fileloc, len(stale_ids)
        )
    )
    return DeclareResult(
        fileloc=fileloc,
        dag_ids=dag_ids,
        stale_dag_ids=stale_ids,
        assets_created=assets.created,
        assets_updated=assets.updated,
        aliases_created=aliases.created,
        activated=activated,
        deactivated=deactivated,
        warnings=[
            *_moved_dag_warnings(existing, fileloc=fileloc),
            *_unmatched_ref_warnings(manifest.dags),
        ],
    )


def dags_unchanged(*, manifest: Manifest, fileloc: str) -> bool:
    """True when :func:`dags_declare` of ``manifest`` for ``fileloc`` would change nothing: the
    same DAGs (none to mark stale), rows, tasks, assets, aliases, references and active assets.
    Reads only (a handful of queries); the DAG processor skips the write when it holds."""
    dag_ids = [decl.dag_id for decl in manifest.dags]
    if _stale_dag_ids(fileloc=fileloc, kept=dag_ids):
        return False
    if not _dag_rows_unchanged(manifest.dags, fileloc=fileloc):
        return False
    asset_ids = _declared_asset_ids_if_unchanged(manifest.assets)
    if asset_ids is None or not _aliases_unchanged(manifest.aliases):
        return False
    alias_ids = dict(AssetAlias.objects.filter(name__in=manifest.aliases).values_list("name", "pk"))
    wanted = _references_wanted(manifest.dags, asset_ids=asset_ids, alias_ids=alias_ids)
    return all(
        set(model._default_manager.filter(dag_id__in=dag_ids).values_list(*key_fields))
        == wanted[model]
        for model, key_fields in _REFERENCE_TABLES
    )


def _dag_rows_unchanged(dags: tuple[DagDecl, ...], *, fileloc: str) -> bool:
    """Every declared DAG is stored, from ``fileloc``, with exactly the declared row and
    tasks."""
    stored = Dag.objects.in_bulk([decl.dag_id for decl in dags])
    if len(stored) != len(dags):
        return False
    fields = ("is_paused", "is_stale", "asset_expression", *DECLARED_SCHEDULE_FIELDS, "task_ids")
    now = timezone.now()
    for decl in dags:
        have = stored[decl.dag_id]
        paused = decl.is_paused if decl.is_paused is not None else have.is_paused
        want = _dag_row(decl, is_paused=paused, fileloc=fileloc, now=now)
        if any(getattr(have, name) != getattr(want, name) for name in (*fields, "fileloc")):
            return False

    def task_key(task: DagTask) -> tuple[Any, ...]:
        values = (getattr(task, name) for name in _DAG_TASK_FIELDS)
        return tuple(tuple(value) if isinstance(value, list) else value for value in values)

    have_tasks = DagTask.objects.filter(dag_id__in=[decl.dag_id for decl in dags])
    return {task_key(task) for task in have_tasks} == {
        task_key(task) for task in _dag_task_rows(dags)
    }


def _declared_asset_ids_if_unchanged(
    wanted: Mapping[AssetUniqueKey, AssetDecl],
) -> dict[AssetUniqueKey, int] | None:
    """The declared assets' ids when each is stored with its declared group/extra and is
    active; ``None`` otherwise."""
    rows = Asset.objects.filter(
        name__in={key.name for key in wanted}, uri__in={key.uri for key in wanted}
    )
    ids: dict[AssetUniqueKey, int] = {}
    now = timezone.now()
    for asset in rows:
        decl = wanted.get(AssetUniqueKey(name=asset.name, uri=asset.uri))
        if decl is not None:
            if _asset_apply(asset, decl, now=now):
                return None
            ids[decl.key] = asset.pk
    if len(ids) != len(wanted):
        return None
    if AssetActive.objects.filter(asset_id__in=ids.values()).count() != len(ids):
        return None
    return ids


def _aliases_unchanged(wanted: Mapping[str, AliasDecl]) -> bool:
    """Every declared alias is stored, with its declared group."""
    if not wanted:
        return True
    groups = dict(AssetAlias.objects.filter(name__in=wanted).values_list("name", "group"))
    return groups.keys() == wanted.keys() and all(
        decl.group is None or groups[name] == decl.group for name, decl in wanted.items()
    )


@transaction.atomic
def dags_set_paused(*, dag_ids: Iterable[str], is_paused: bool, actor: Actor | None = None) -> int:
    """Pause or unpause DAGs; returns how many rows changed. ``actor``: one ``patch_dag``
    event per DAG named that exists (changed or not, as Airflow records each request)."""
    dag_ids = list(dag_ids)
    changed = (
        Dag.objects.filter(dag_id__in=dag_ids)
        .exclude(is_paused=is_paused)
        .update(is_paused=is_paused)
    )
    if changed:
        asset_watchers_sync()  # a paused DAG's watchers stop, an unpaused one's start
    if actor is not None:
        found = Dag.objects.filter(dag_id__in=dag_ids).order_by("dag_id")
        event_logs_record(
            actor,
            "patch_dag",
            dag_ids=found.values_list("dag_id", flat=True),
            extra={"is_paused": is_paused},
        )
    return changed


# --- DAG rows --------------------------------------------------------------------------------


def _stale_dag_ids(*, fileloc: str, kept: list[str]) -> list[str]:
    """DAGs loaded from ``fileloc`` before that the manifest no longer has."""
    return sorted(
        Dag.objects.filter(fileloc=fileloc, is_stale=False)
        .exclude(dag_id__in=kept)
        .values_list("dag_id", flat=True)
    )


def _dags_upsert(
    dags: Iterable[DagDecl], *, existing: Mapping[str, Dag], fileloc: str, now: datetime
) -> None:
    """Insert or update one row per declared DAG; an omitted pause flag keeps the stored one."""

    def is_paused(decl: DagDecl) -> bool:
        if decl.is_paused is not None:
            return decl.is_paused
        stored = existing.get(decl.dag_id)
        if stored is not None:
            return stored.is_paused
        return bool(decl.is_paused_upon_creation)

    Dag.objects.bulk_create(
        [_dag_row(decl, is_paused=is_paused(decl), fileloc=fileloc, now=now) for decl in dags],
        update_conflicts=True,
        unique_fields=["dag_id"],
        update_fields=[
            "is_paused",
            "is_stale",
            "asset_expression",
            *DECLARED_SCHEDULE_FIELDS,
            "task_ids",
            "fileloc",
            "last_parsed_time",
        ],
    )


def _dag_row(decl: DagDecl, *, is_paused: bool, fileloc: str, now: datetime) -> Dag:
    """The ``dag`` row a declaration stores (unsaved)."""
    return Dag(
        dag_id=decl.dag_id,
        is_paused=is_paused,
        is_stale=False,
        asset_expression=(
            condition_expression(decl.schedule) if decl.schedule is not None else None
        ),
        timetable=decl.timetable.as_json() if decl.timetable is not None else None,
        timetable_summary=decl.timetable_summary,
        start_date=decl.start_date,
        end_date=decl.end_date,
        catchup=decl.catchup,
        max_active_runs=decl.max_active_runs,
        max_active_tasks=decl.max_active_tasks,
        one_run_per_event=decl.one_run_per_event,
        tags=list(decl.tags),
        owners=sorted({task.owner for task in decl.tasks}),
        params=params_dump(decl.params),
        dagrun_timeout=decl.dagrun_timeout,
        has_on_success_callback=decl.has_on_success_callback,
        has_on_failure_callback=decl.has_on_failure_callback,
        asset_watchers=list(decl.asset_watchers),
        task_ids=decl.task_ids,
        fileloc=fileloc,
        last_parsed_time=now,
    )


#: What a declaration sets on a DAG's row besides its asset condition and tasks.
DECLARED_SCHEDULE_FIELDS = (
    "timetable",
    "timetable_summary",
    "start_date",
    "end_date",
    "catchup",
    "max_active_runs",
    "max_active_tasks",
    "one_run_per_event",
    "tags",
    "owners",
    "params",
    "dagrun_timeout",
    "has_on_success_callback",
    "has_on_failure_callback",
    "asset_watchers",
)


def _dag_task_rows(dags: Iterable[DagDecl]) -> list[DagTask]:
    """The ``dag_task`` rows the declarations store (unsaved)."""
    return [
        DagTask(
            dag_id=decl.dag_id,
            task_id=task.task_id,
            retries=task.retries,
            retry_delay=task.retry_delay,
            callable=task.callable,
            airflow_dag_file=task.airflow_dag_file,
            airflow_dags_folder=task.airflow_dags_folder,
            upstream=list(task.upstream),
            trigger_rule=task.trigger_rule,
            is_leaf=task.task_id in leaves,
            retry_exponential_backoff=task.retry_exponential_backoff,
            max_retry_delay=task.max_retry_delay,
            depends_on_past=task.depends_on_past,
            wait_for_downstream=task.wait_for_downstream,
            ignore_first_depends_on_past=task.ignore_first_depends_on_past,
            email=list(task.email),
            email_on_failure=task.email_on_failure,
            email_on_retry=task.email_on_retry,
            pool=task.pool,
            pool_slots=task.pool_slots,
            priority_weight=task.priority_weight,
            weight_rule=task.weight_rule,
            owner=task.owner,
            queue=task.queue,
            max_active_tis_per_dag=task.max_active_tis_per_dag,
            max_active_tis_per_dagrun=task.max_active_tis_per_dagrun,
            mapped=task.mapped,
            start_trigger_args=task.start_trigger_args,
            has_on_failure_callback=task.has_on_failure_callback,
            has_on_retry_callback=task.has_on_retry_callback,
        )
        for decl in dags
        for leaves in [decl.leaf_task_ids]
        for task in decl.tasks
    ]


#: The ``dag_task`` fields a declaration sets.
_DAG_TASK_FIELDS = (
    "dag_id",
    "task_id",
    "retries",
    "retry_delay",
    "callable",
    "airflow_dag_file",
    "airflow_dags_folder",
    "upstream",
    "is_leaf",
    *TASK_SETTINGS,
)


def _dag_tasks_sync(dags: Iterable[DagDecl]) -> None:
    """Each declared DAG's ``DagTask`` rows become exactly its declared tasks."""
    dags = list(dags)
    DagTask.objects.filter(dag_id__in=[decl.dag_id for decl in dags]).delete()
    DagTask.objects.bulk_create(_dag_task_rows(dags))


def _dags_mark_stale(dag_ids: list[str], *, now: datetime) -> None:
    if dag_ids:
        Dag.objects.filter(dag_id__in=dag_ids).update(is_stale=True, last_parsed_time=now)
        logger.info("marked %d DAG(s) stale: %s", len(dag_ids), ", ".join(dag_ids))


def _moved_dag_warnings(existing: Mapping[str, Dag], *, fileloc: str) -> list[str]:
    return [
        f"DAG {dag_id} moved from {dag.fileloc}"
        for dag_id, dag in existing.items()
        if dag.fileloc and dag.fileloc != fileloc and not dag.is_stale
    ]


def _unmatched_ref_warnings(dags: Iterable[DagDecl]) -> list[str]:
    """One warning per ``asset_ref`` that no active asset matches once this load is stored: it
    resolves to nothing (a schedule on it is never met, a task using it fails to resolve it)
    until some manifest declares an asset with that name or uri. At most two queries."""
    places: list[tuple[str, AssetNameRef | AssetUriRef]] = []
    for dag in dags:
        if dag.schedule is not None:
            refs = condition_references(dag.schedule)
            places += [
                (f"DAG {dag.dag_id} schedule", AssetNameRef(n)) for n in sorted(refs.name_refs)
            ]
            places += [
                (f"DAG {dag.dag_id} schedule", AssetUriRef(u)) for u in sorted(refs.uri_refs)
            ]
        for task in dag.tasks:
            for kind, leaves in (("outlet", task.outlets), ("inlet", task.inlets)):
                places += [
                    (f"DAG {dag.dag_id} task {task.task_id} {kind}", leaf)
                    for leaf in leaves
                    if isinstance(leaf, AssetNameRef | AssetUriRef)
                ]
    names = {ref.name for _, ref in places if isinstance(ref, AssetNameRef)}
    uris = {ref.uri for _, ref in places if isinstance(ref, AssetUriRef)}
    active_names = (
        set(AssetActive.objects.filter(name__in=names).values_list("name", flat=True))
        if names
        else set()
    )
    active_uris = (
        set(AssetActive.objects.filter(uri__in=uris).values_list("uri", flat=True))
        if uris
        else set()
    )
    warnings = []
    for where, ref in places:
        if isinstance(ref, AssetNameRef) and ref.name not in active_names:
            what, value = "name", ref.name
        elif isinstance(ref, AssetUriRef) and ref.uri not in active_uris:
            what, value = "uri", ref.uri
        else:
            continue
        warnings.append(
            f"{where}: asset_ref {{{what}: {value!r}}} matches no declared asset; it resolves "
            f"to nothing until a manifest declares an asset with {what} {value!r}"
        )
    return warnings


# --- assets and aliases ----------------------------------------------------------------------


class _AssetRows(NamedTuple):
    ids: dict[AssetUniqueKey, int]
    created: int
    updated: int


class _AliasRows(NamedTuple):
    ids: dict[str, int]
    created: int


def _assets_upsert(wanted: Mapping[AssetUniqueKey, AssetDecl], *, now: datetime) -> _AssetRows:
    """Create missing assets and update declared group/extra; ids by key and counts."""

    def load() -> dict[AssetUniqueKey, Asset]:
        rows = Asset.objects.filter(
            name__in={key.name for key in wanted}, uri__in={key.uri for key in wanted}
        )
        found = {AssetUniqueKey(name=asset.name, uri=asset.uri): asset for asset in rows}
        return {key: asset for key, asset in found.items() if key in wanted}

    existing = load()
    created_keys = {key for key in wanted if key not in existing}
    missing = [
        Asset(
            name=key.name,
            uri=key.uri,
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
    changed = [
        existing[key]
        for key, decl in wanted.items()
        if key not in created_keys and _asset_apply(existing[key], decl, now=now)
    ]
    if changed:
        Asset.objects.bulk_update(changed, ["group", "extra", "updated_at"])
    return _AssetRows(
        ids={key: asset.pk for key, asset in existing.items()},
        created=len(missing),
        updated=len(changed),
    )


def _asset_apply(asset: Asset, decl: AssetDecl, *, now: datetime) -> bool:
    """Set the group/extra the declaration gives; True when the stored asset changes."""
    dirty = False
    if decl.group is not None and asset.group != decl.group:
        asset.group, dirty = decl.group, True
    if decl.extra is not None and asset.extra != decl.extra:
        asset.extra, dirty = decl.extra, True
    if dirty:
        asset.updated_at = now
    return dirty


def _aliases_upsert(wanted: Mapping[str, AliasDecl]) -> _AliasRows:
    """Create missing aliases and update declared groups; ids by name and how many were new."""
    if not wanted:
        return _AliasRows(ids={}, created=0)
    existing = {alias.name: alias for alias in AssetAlias.objects.filter(name__in=wanted)}
    missing = [
        AssetAlias(name=decl.name, group=decl.group if decl.group is not None else DEFAULT_GROUP)
        for name, decl in wanted.items()
        if name not in existing
    ]
    if missing:
        AssetAlias.objects.bulk_create(missing, ignore_conflicts=True)
    changed = []
    for name, alias in existing.items():
        group = wanted[name].group
        if group is not None and alias.group != group:
            alias.group = group
            changed.append(alias)
    if changed:
        AssetAlias.objects.bulk_update(changed, ["group"])
    ids = dict(AssetAlias.objects.filter(name__in=wanted).values_list("name", "pk"))
    return _AliasRows(ids=ids, created=len(missing))


# --- references ------------------------------------------------------------------------------

#: Each reference table with the fields that identify one of its rows (``dag_id`` first).
_REFERENCE_TABLES: tuple[tuple[type[models.Model], tuple[str, ...]], ...] = (
    (DagScheduleAssetReference, ("dag_id", "asset_id")),
    (DagScheduleAssetAliasReference, ("dag_id", "alias_id")),
    (DagScheduleAssetNameReference, ("dag_id", "name")),
    (DagScheduleAssetUriReference, ("dag_id", "uri")),
    (TaskOutletAssetReference, ("dag_id", "task_id", "asset_id")),
    (TaskInletAssetReference, ("dag_id", "task_id", "asset_id")),
    (TaskLeafReference, ("dag_id", "task_id", "direction", "kind", "value")),
)
#: The reference tables that point at assets (what makes an asset active).
_ASSET_REFERENCE_TABLES: tuple[type[models.Model], ...] = (
    DagScheduleAssetReference,
    TaskOutletAssetReference,
    TaskInletAssetReference,
)


def _references_sync(
    dags: Iterable[DagDecl],
    *,
    dag_ids: list[str],
    asset_ids: Mapping[AssetUniqueKey, int],
    alias_ids: Mapping[str, int],
) -> None:
    """Make the reference tables' rows for ``dag_ids`` exactly what ``dags`` declare."""
    wanted = _references_wanted(dags, asset_ids=asset_ids, alias_ids=alias_ids)
    for model, key_fields in _REFERENCE_TABLES:
        rows = model._default_manager.filter(dag_id__in=dag_ids).values_list("pk", *key_fields)
        have = {tuple(row[1:]): row[0] for row in rows}
        obsolete = [pk for key, pk in have.items() if key not in wanted[model]]
        if obsolete:
            model._default_manager.filter(pk__in=obsolete).delete()
        new = [key for key in wanted[model] if key not in have]
        if new:
            model._default_manager.bulk_create(
                [model(**dict(zip(key_fields, key, strict=True))) for key in new]
            )


def _references_wanted(
    dags: Iterable[DagDecl],
    *,
    asset_ids: Mapping[AssetUniqueKey, int],
    alias_ids: Mapping[str, int],
) -> dict[type[models.Model], set[tuple[Any, ...]]]:
    """Per reference table, the rows (tuples of its key fields) the declarations call for.

    Refs and aliases in task inlets/outlets are resolved at run time: they get a
    ``TaskLeafReference`` row (what the DAG page draws), no asset reference.
    """
    wanted: dict[type[models.Model], set[tuple[Any, ...]]] = {
        model: set() for model, _ in _REFERENCE_TABLES
    }
    for dag in dags:
        if dag.schedule is not None:
            refs = condition_references(dag.schedule)
            wanted[DagScheduleAssetReference].update(
                (dag.dag_id, asset_ids[key]) for key in refs.asset_keys
            )
            wanted[DagScheduleAssetAliasReference].update(
                (dag.dag_id, alias_ids[name]) for name in refs.alias_names
            )
            wanted[DagScheduleAssetNameReference].update(
                (dag.dag_id, name) for name in refs.name_refs
            )
            wanted[DagScheduleAssetUriReference].update((dag.dag_id, uri) for uri in refs.uri_refs)
        for task in dag.tasks:
            for model, leaves in (
                (TaskOutletAssetReference, task.outlets),
                (TaskInletAssetReference, task.inlets),
            ):
                wanted[model].update(
                    (dag.dag_id, task.task_id, asset_ids[leaf])
                    for leaf in leaves
                    if isinstance(leaf, AssetUniqueKey)
                )
            for direction, leaves in (
                (TaskLeafReference.Direction.OUTLET, task.outlets),
                (TaskLeafReference.Direction.INLET, task.inlets),
            ):
                wanted[TaskLeafReference].update(
                    (dag.dag_id, task.task_id, direction, *leaf_reference)
                    for leaf in leaves
                    if (leaf_reference := _leaf_reference(leaf)) is not None
                )
    return wanted


def _leaf_reference(leaf: Leaf) -> tuple[str, str] | None:
    """``(kind, value)`` of a ``TaskLeafReference`` for an alias or ``Asset.ref`` leaf; ``None``
    for an asset (it has its own reference tables)."""
    if isinstance(leaf, AssetAliasUniqueKey):
        return TaskLeafReference.Kind.ALIAS, leaf.name
    if isinstance(leaf, AssetNameRef):
        return TaskLeafReference.Kind.NAME_REF, leaf.name
    if isinstance(leaf, AssetUriRef):
        return TaskLeafReference.Kind.URI_REF, leaf.uri
    return None


def _referenced_asset_ids(
    *, dag_ids: Iterable[str] | None = None, asset_ids: set[int] | None = None
) -> set[int]:
    """Assets referenced by non-stale DAGs (optionally only ``dag_ids`` / ``asset_ids``)."""
    found: set[int] = set()
    for model in _ASSET_REFERENCE_TABLES:
        rows = model._default_manager.filter(dag__is_stale=False)
        if dag_ids is not None:
            rows = rows.filter(dag_id__in=list(dag_ids))
        if asset_ids is not None:
            rows = rows.filter(asset_id__in=asset_ids)
        found.update(rows.values_list("asset_id", flat=True))
    return found


# --- active assets ---------------------------------------------------------------------------


def _active_assets_sync(
    *, asset_ids: Mapping[AssetUniqueKey, int], referenced_before: set[int]
) -> tuple[int, int]:
    """Make every declared asset active and deactivate the ones no DAG declares any more.

    Those are the assets only this file's DAGs declared before (``referenced_before``) that
    no non-stale DAG references now. Raises ``AssetConflictError`` when two active assets
    would share a name or a uri. Returns how many were activated and deactivated.
    """
    keys_by_id = {pk: key for key, pk in asset_ids.items()}
    still_referenced = _referenced_asset_ids(asset_ids=referenced_before)
    lost_ids = referenced_before - still_referenced - keys_by_id.keys()
    _check_active_conflicts(keys_by_id, leaving=lost_ids)

    deactivated = 0
    if lost_ids:
        deactivated, _ = AssetActive.objects.filter(asset_id__in=lost_ids).delete()
        asset_states_forget(asset_ids=lost_ids)  # no task can reach their state any more
    already_active = set(
        AssetActive.objects.filter(asset_id__in=set(keys_by_id)).values_list("asset_id", flat=True)
    )
    new_active = [
        AssetActive(asset_id=pk, name=keys_by_id[pk].name, uri=keys_by_id[pk].uri)
        for pk in sorted(keys_by_id.keys() - already_active)
    ]
    AssetActive.objects.bulk_create(new_active)
    return len(new_active), deactivated


def _check_active_conflicts(
    to_activate: Mapping[int, AssetUniqueKey], *, leaving: set[int]
) -> None:
    """Raise ``AssetConflictError`` naming every name/uri clash among the assets to activate
    and against the other active assets (except those ``leaving``)."""
    nearby = AssetActive.objects.filter(
        Q(name__in={key.name for key in to_activate.values()})
        | Q(uri__in={key.uri for key in to_activate.values()})
    ).values_list("asset_id", "name", "uri")
    others = {
        pk: AssetUniqueKey(name=name, uri=uri)
        for pk, name, uri in nearby
        if pk not in leaving and pk not in to_activate
    }
    problems: list[str] = []
    by_name: dict[str, tuple[int, AssetUniqueKey, bool]] = {}
    by_uri: dict[str, tuple[int, AssetUniqueKey, bool]] = {}
    for asset_id, key in others.items():
        by_name[key.name] = by_uri[key.uri] = (asset_id, key, True)
    for asset_id, key in sorted(to_activate.items(), key=lambda item: (item[1].name, item[1].uri)):
        for label, value, index in (("name", key.name, by_name), ("uri", key.uri, by_uri)):
            clash = index.get(value)
            if clash is not None and clash[0] != asset_id:
                where = " (already active)" if clash[2] else ""
                problems.append(
                    f"assets {asset_describe(clash[1])}{where} and {asset_describe(key)} "
                    f"would both be active with the same {label} {value!r}"
                )
            else:
                index[value] = (asset_id, key, False)
    if problems:
        raise AssetConflictError("; ".join(problems))
