"""Registering the asset changes of a task that succeeded (SPEC §4).

One entry point, :func:`asset_changes_register`. It turns the task's declared outlets and the
outlet events it wrote into rows of ``asset_event`` (plus ``asset``, ``asset_alias``,
``asset_alias_asset`` and ``asset_alias_asset_event`` for events emitted through aliases),
queues the consumer DAGs in ``asset_dag_run_queue`` and, once the transaction commits, sends
the ``assets_app.signals`` notifications.

Statements per call are bounded by a constant whatever the number of outlets and events:
every step below is one bulk ``INSERT`` or one ``IN`` lookup, and a step with nothing to do
is skipped. In order:

1. ``SELECT`` the active assets matching the declared asset keys, names and uris;
2. ``SELECT`` the assets that alias events target;
3. ``INSERT`` the missing targets (``ON CONFLICT DO NOTHING``) and 4. ``SELECT`` them again;
5. ``SELECT`` the aliases events were emitted through;
6. ``INSERT`` the missing aliases (``ON CONFLICT DO NOTHING``) and 7. ``SELECT`` them again;
8. ``INSERT`` the alias → asset links (``ON CONFLICT DO NOTHING``);
9. ``INSERT`` the events (``RETURNING id``);
10. ``INSERT`` the alias → event links;
11. ``SELECT`` the consumer DAGs (one ``UNION ALL`` over the four schedule reference tables);
12. ``INSERT`` the queue rows (``ON CONFLICT DO NOTHING``).

On SQLite Django 5.2 splits a bulk ``INSERT`` into batches of at most 999 bound variables
(``features.max_query_params``), so steps 3, 6, 8, 9, 10 and 12 become several statements
there once they carry more than ~100 rows; on PostgreSQL each step is one statement.

Concurrency: rows that several requests may create at once (target assets, aliases, links,
queue rows) are inserted with ``ON CONFLICT DO NOTHING`` over their unique constraints and
then re-selected by natural key. On PostgreSQL (READ COMMITTED) an insert that meets a row
another transaction inserted but has not committed waits for that transaction; once it
commits the insert does nothing and the following ``SELECT`` (a new snapshot) sees the row;
if it rolls back, the insert goes through. Rows are inserted sorted by natural key and the
tables always in the same order, so two requests cannot deadlock on each other's inserts.
On SQLite writers are serialized (``BEGIN IMMEDIATE``), so there is no race at all.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any

from django.db import transaction
from django.db.models import CharField, Q, QuerySet, Value
from django.db.models.functions import Cast
from django.utils import timezone

from assets_app.models import (
    Asset,
    AssetAlias,
    AssetAliasAsset,
    AssetAliasAssetEvent,
    AssetDagRunQueue,
    AssetEvent,
    DagScheduleAssetAliasReference,
    DagScheduleAssetNameReference,
    DagScheduleAssetReference,
    DagScheduleAssetUriReference,
    TaskInstance,
)
from assets_app.outlets import (
    AliasOutletEvent,
    AssetKey,
    AssetOutletEvent,
    OutletProfile,
    OutletType,
)
from assets_app.signals import asset_changed, asset_event_emitted

logger = logging.getLogger(__name__)


class AssetRegistrationError(Exception):
    """Rows that must exist after an idempotent insert could not be read back.

    Cannot happen under READ COMMITTED (Django's default); raised rather than silently
    dropping events if the database runs at a stricter isolation level.
    """

    code = "asset_registration_conflict"


@dataclass(frozen=True)
class RegistrationResult:
    """What one call registered.

    ``events`` are the new :class:`AssetEvent` rows (saved, with ``pk``), in creation order:
    first the events of declared assets and refs, then one per alias-event group.
    ``queued`` are the ``(asset_id, dag_id)`` pairs now present in ``asset_dag_run_queue``
    because of this call (whether inserted now or already waiting). ``skipped`` are the
    declared ``Asset``/``AssetNameRef``/``AssetUriRef`` outlets that matched no active asset.
    """

    events: tuple[AssetEvent, ...] = ()
    changed_asset_ids: tuple[int, ...] = ()
    queued: tuple[tuple[int, str], ...] = ()
    skipped: tuple[OutletProfile, ...] = ()

    @property
    def event_ids(self) -> tuple[int, ...]:
        return tuple(event.pk for event in self.events)


@dataclass(frozen=True)
class _DeclaredOutlets:
    """The task's declared outlets split by type, each de-duplicated in declaration order."""

    asset_keys: tuple[AssetKey, ...]
    name_refs: tuple[str, ...]
    uri_refs: tuple[str, ...]
    alias_names: frozenset[str]


@dataclass
class _PlannedEvent:
    asset: Asset
    extra: dict[str, Any]
    partition_key: str | None
    aliases: tuple[AssetAlias, ...] = ()


# extra per partition key (None: no partition), last write wins as in Airflow's accessors
_ExtrasByPartition = dict[str | None, dict[str, Any]]


def asset_changes_register(
    *,
    task_instance: TaskInstance,
    task_outlets: Sequence[OutletProfile],
    outlet_events: Sequence[AssetOutletEvent | AliasOutletEvent],
) -> RegistrationResult:
    """Record the asset events of ``task_instance``'s success and queue consumer DAGs.

    Implements SPEC §4: one event per declared active asset (per declared ref, per distinct
    partition key), one event per group of alias events sharing asset, dest_asset_extra, extra
    and partition key; alias targets and aliases created when missing; consumers queued.
    Declared assets or refs that match no active asset are skipped with a warning.

    Transaction and locks: the execution API calls this inside its ``transaction.atomic()``
    with the task instance row already locked (``select_for_update``), so one success is
    registered at most once. This function joins the caller's transaction (no savepoint);
    called outside any transaction it opens its own. Any database error propagates and rolls
    the whole transaction back. Signals are sent only after the outermost transaction commits.
    """
    declared = _outlets_split(task_outlets)
    asset_events = [e for e in outlet_events if isinstance(e, AssetOutletEvent)]
    alias_events = [e for e in outlet_events if isinstance(e, AliasOutletEvent)]

    with transaction.atomic(savepoint=False):
        planned, skipped = _declared_asset_events_plan(declared=declared, events=asset_events)
        planned += _alias_events_plan(declared=declared, events=alias_events)
        if skipped:
            logger.warning(
                "Task %s (%s): no event for declared outlets that are unknown or inactive: %s",
                task_instance,
                task_instance.pk,
                ", ".join(_describe(profile) for profile in skipped),
            )
        if not planned:
            return RegistrationResult(skipped=tuple(skipped))

        now = timezone.now()  # after any wait on concurrent inserts above
        events = _events_create(planned=planned, task_instance=task_instance, now=now)
        queued = _consumers_queue(planned=planned, now=now)

        changed_assets = list({p.asset.pk: p.asset for p in planned}.values())
        transaction.on_commit(
            partial(_notify, assets=changed_assets, planned=planned, events=events), robust=True
        )

    return RegistrationResult(
        events=tuple(events),
        changed_asset_ids=tuple(asset.pk for asset in changed_assets),
        queued=tuple(queued),
        skipped=tuple(skipped),
    )


# --- declared outlets -----------------------------------------------------------------------


def _outlets_split(task_outlets: Sequence[OutletProfile]) -> _DeclaredOutlets:
    asset_keys: dict[AssetKey, None] = {}
    name_refs: dict[str, None] = {}
    uri_refs: dict[str, None] = {}
    alias_names: set[str] = set()
    for profile in task_outlets:
        if profile.type == OutletType.ASSET and profile.name and profile.uri:
            asset_keys[AssetKey(name=profile.name, uri=profile.uri)] = None
        elif profile.type == OutletType.NAME_REF and profile.name:
            name_refs[profile.name] = None
        elif profile.type == OutletType.URI_REF and profile.uri:
            uri_refs[profile.uri] = None
        elif profile.type == OutletType.ALIAS and profile.name:
            alias_names.add(profile.name)
    return _DeclaredOutlets(
        asset_keys=tuple(asset_keys),
        name_refs=tuple(name_refs),
        uri_refs=tuple(uri_refs),
        alias_names=frozenset(alias_names),
    )


def _describe(profile: OutletProfile) -> str:
    if profile.type == OutletType.NAME_REF:
        return f"Asset.ref(name={profile.name!r})"
    if profile.type == OutletType.URI_REF:
        return f"Asset.ref(uri={profile.uri!r})"
    return f"Asset(name={profile.name!r}, uri={profile.uri!r})"


def _active_assets_select(declared: _DeclaredOutlets) -> list[Asset]:
    """Step 1: the active assets matching any declared key, name or uri (one query).

    Matches on ``asset_active``'s unique name/uri columns; exact (name, uri) keys are checked
    by the caller. At most one active asset per name and per uri, so the result is small.
    """
    names = [key.name for key in declared.asset_keys] + list(declared.name_refs)
    uris = [key.uri for key in declared.asset_keys] + list(declared.uri_refs)
    condition = Q()
    if names:
        condition |= Q(active__name__in=sorted(set(names)))
    if uris:
        condition |= Q(active__uri__in=sorted(set(uris)))
    if not condition:
        return []
    return list(Asset.objects.filter(condition))


def _declared_asset_events_plan(
    *, declared: _DeclaredOutlets, events: Sequence[AssetOutletEvent]
) -> tuple[list[_PlannedEvent], list[OutletProfile]]:
    """Steps 3-4: one event per declared active asset or ref (per partition key)."""
    if not (declared.asset_keys or declared.name_refs or declared.uri_refs):
        return [], []
    active = _active_assets_select(declared)
    active_by_key = {AssetKey(name=a.name, uri=a.uri): a for a in active}
    active_by_name = {a.name: a for a in active}
    active_by_uri = {a.uri: a for a in active}

    extras_by_key: defaultdict[AssetKey, _ExtrasByPartition] = defaultdict(dict)
    extras_by_name: defaultdict[str, _ExtrasByPartition] = defaultdict(dict)
    extras_by_uri: defaultdict[str, _ExtrasByPartition] = defaultdict(dict)
    for event in events:
        extras_by_key[event.key][event.partition_key] = event.extra
        extras_by_name[event.key.name][event.partition_key] = event.extra
        extras_by_uri[event.key.uri][event.partition_key] = event.extra

    planned: list[_PlannedEvent] = []
    skipped: list[OutletProfile] = []

    def plan(asset: Asset | None, extras: _ExtrasByPartition, profile: OutletProfile) -> None:
        if asset is None:
            skipped.append(profile)
            return
        for partition_key, extra in (extras or {None: {}}).items():
            planned.append(_PlannedEvent(asset=asset, extra=extra, partition_key=partition_key))

    for key in declared.asset_keys:
        plan(
            active_by_key.get(key),
            extras_by_key.get(key, {}),
            OutletProfile(type=OutletType.ASSET, name=key.name, uri=key.uri),
        )
    for name in declared.name_refs:
        plan(
            active_by_name.get(name),
            extras_by_name.get(name, {}),
            OutletProfile(type=OutletType.NAME_REF, name=name),
        )
    for uri in declared.uri_refs:
        plan(
            active_by_uri.get(uri),
            extras_by_uri.get(uri, {}),
            OutletProfile(type=OutletType.URI_REF, uri=uri),
        )
    return planned, skipped


# --- alias events ---------------------------------------------------------------------------


def _canonical_json(value: Mapping[str, Any]) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _alias_events_plan(
    *, declared: _DeclaredOutlets, events: Sequence[AliasOutletEvent]
) -> list[_PlannedEvent]:
    """Step 5: one event per group of alias events; targets, aliases and links ensured."""
    # (asset key, dest_asset_extra JSON, extra JSON, partition key) -> alias names, in order
    groups: dict[tuple[AssetKey, str, str, str | None], dict[str, None]] = {}
    target_extras: dict[AssetKey, dict[str, Any]] = {}  # first dest_asset_extra seen
    for event in events:
        if event.source_alias_name not in declared.alias_names:
            continue
        group = (
            event.dest_asset_key,
            _canonical_json(event.dest_asset_extra),
            _canonical_json(event.extra),
            event.partition_key,
        )
        groups.setdefault(group, {})[event.source_alias_name] = None
        target_extras.setdefault(event.dest_asset_key, event.dest_asset_extra)
    if not groups:
        return []

    assets = _assets_ensure(target_extras)
    aliases = _aliases_ensure({name for names in groups.values() for name in names})
    links = {
        (aliases[name].pk, assets[key].pk)
        for (key, _, _, _), names in groups.items()
        for name in names
    }
    AssetAliasAsset.objects.bulk_create(
        [
            AssetAliasAsset(alias_id=alias_id, asset_id=asset_id)
            for alias_id, asset_id in sorted(links)
        ],
        ignore_conflicts=True,
    )
    return [
        _PlannedEvent(
            asset=assets[key],
            extra=json.loads(extra_json),
            partition_key=partition_key,
            aliases=tuple(aliases[name] for name in names),
        )
        for (key, _, extra_json, partition_key), names in groups.items()
    ]


def _assets_by_key(keys: Iterable[AssetKey]) -> dict[AssetKey, Asset]:
    """Assets with exactly these (name, uri) keys, active or not (one query).

    Looks up ``name IN (…)`` (the leading column of the (name, uri) unique index) and drops
    the rare rows whose uri is not wanted here. Adding ``AND uri IN (…)`` would make SQLite
    probe the index for every (name, uri) combination: quadratic in the number of keys.
    """
    wanted = set(keys)
    rows = Asset.objects.filter(name__in=sorted({k.name for k in wanted}))
    return {key: a for a in rows if (key := AssetKey(name=a.name, uri=a.uri)) in wanted}


def _assets_ensure(extras: Mapping[AssetKey, dict[str, Any]]) -> dict[AssetKey, Asset]:
    """Steps 2-4: the target assets, creating missing ones (not active) with ``extras``."""
    assets = _assets_by_key(extras)
    missing = sorted((k for k in extras if k not in assets), key=lambda k: (k.name, k.uri))
    if missing:
        Asset.objects.bulk_create(
            [Asset(name=k.name, uri=k.uri, extra=extras[k]) for k in missing],
            ignore_conflicts=True,
        )
        assets |= _assets_by_key(missing)
        logger.info("Created %d asset(s) emitted through aliases", len(missing))
    if len(assets) != len(extras):
        raise AssetRegistrationError("alias target assets could not be read back")
    return assets


def _aliases_ensure(names: set[str]) -> dict[str, AssetAlias]:
    """Steps 5-7: the aliases with these names, creating missing ones."""
    aliases = {a.name: a for a in AssetAlias.objects.filter(name__in=sorted(names))}
    missing = sorted(names - aliases.keys())
    if missing:
        AssetAlias.objects.bulk_create(
            [AssetAlias(name=name) for name in missing], ignore_conflicts=True
        )
        aliases |= {a.name: a for a in AssetAlias.objects.filter(name__in=missing)}
    if len(aliases) != len(names):
        raise AssetRegistrationError("asset aliases could not be read back")
    return aliases


# --- events and consumers -------------------------------------------------------------------


def _events_create(
    *, planned: list[_PlannedEvent], task_instance: TaskInstance, now: datetime
) -> list[AssetEvent]:
    """Steps 9-10: insert every event in one statement, then their alias links."""
    events = [
        AssetEvent(
            asset=p.asset,
            extra=p.extra,
            partition_key=p.partition_key,
            source_dag_id=task_instance.dag_id,
            source_task_id=task_instance.task_id,
            source_run_id=task_instance.run_id,
            source_map_index=task_instance.map_index,
            timestamp=now,
        )
        for p in planned
    ]
    # PostgreSQL and SQLite >= 3.35 set the new ids on ``events``, in order.
    AssetEvent.objects.bulk_create(events)
    AssetAliasAssetEvent.objects.bulk_create(
        [
            AssetAliasAssetEvent(alias=alias, event=event)
            for p, event in zip(planned, events, strict=True)
            for alias in p.aliases
        ]
    )
    return events


def _consumers_select(
    *, asset_ids: set[int], alias_ids: set[int], names: set[str], uris: set[str]
) -> list[tuple[str, str, str]]:
    """Step 11: ``(kind, key, dag_id)`` of every live DAG scheduled on one of these.

    ``kind`` is ``asset``/``alias`` (key: the id as text), ``name`` or ``uri``. One
    ``UNION ALL`` query over the four schedule reference tables; paused and stale DAGs are
    left out.
    """
    live = Q(dag__is_paused=False, dag__is_stale=False)

    def tag(kind: str) -> Value:
        return Value(kind, output_field=CharField())

    parts: list[QuerySet[Any, Any]] = []
    if asset_ids:
        parts.append(
            DagScheduleAssetReference.objects.filter(
                live, asset_id__in=sorted(asset_ids)
            ).values_list(tag("asset"), Cast("asset_id", CharField()), "dag_id")
        )
    if alias_ids:
        parts.append(
            DagScheduleAssetAliasReference.objects.filter(
                live, alias_id__in=sorted(alias_ids)
            ).values_list(tag("alias"), Cast("alias_id", CharField()), "dag_id")
        )
    if names:
        parts.append(
            DagScheduleAssetNameReference.objects.filter(live, name__in=sorted(names)).values_list(
                tag("name"), "name", "dag_id"
            )
        )
    if uris:
        parts.append(
            DagScheduleAssetUriReference.objects.filter(live, uri__in=sorted(uris)).values_list(
                tag("uri"), "uri", "dag_id"
            )
        )
    if not parts:
        return []
    first, *rest = parts
    return list(first.union(*rest, all=True) if rest else first)


def _consumers_queue(*, planned: list[_PlannedEvent], now: datetime) -> list[tuple[int, str]]:
    """Steps 11-12: queue every live consumer DAG of the new events, once per (asset, DAG)."""
    # An event with a partition key does not queue non-partitioned consumers, and no DAG is
    # partitioned yet (the model has no such flag), so partitioned events queue nothing.
    queueing = [p for p in planned if p.partition_key is None]
    if not queueing:
        return []
    consumers: defaultdict[tuple[str, str], set[str]] = defaultdict(set)
    for kind, key, dag_id in _consumers_select(
        asset_ids={p.asset.pk for p in queueing},
        alias_ids={alias.pk for p in queueing for alias in p.aliases},
        names={p.asset.name for p in queueing},
        uris={p.asset.uri for p in queueing},
    ):
        consumers[kind, key].add(dag_id)
    if not consumers:
        return []

    pairs: set[tuple[int, str]] = set()
    for p in queueing:
        dag_ids = (
            consumers.get(("asset", str(p.asset.pk)), set())
            | consumers.get(("name", p.asset.name), set())
            | consumers.get(("uri", p.asset.uri), set())
        )
        for alias in p.aliases:
            dag_ids |= consumers.get(("alias", str(alias.pk)), set())
        pairs.update((p.asset.pk, dag_id) for dag_id in dag_ids)
    queued = sorted(pairs)
    AssetDagRunQueue.objects.bulk_create(
        [
            AssetDagRunQueue(asset_id=asset_id, target_dag_id=dag_id, created_at=now)
            for asset_id, dag_id in queued
        ],
        ignore_conflicts=True,
    )
    return queued


# --- notifications --------------------------------------------------------------------------


def _notify(*, assets: list[Asset], planned: list[_PlannedEvent], events: list[AssetEvent]) -> None:
    """Step 8, run by ``on_commit``: send the signals; log, never raise, receiver errors."""
    for asset in assets:
        _log_failures(asset_changed.send_robust(sender=Asset, asset=asset), "asset_changed")
    for p, event in zip(planned, events, strict=True):
        responses = asset_event_emitted.send_robust(
            sender=AssetEvent,
            event=event,
            source_alias_names=tuple(alias.name for alias in p.aliases),
        )
        _log_failures(responses, "asset_event_emitted")


def _log_failures(responses: list[tuple[Any, Any]], signal_name: str) -> None:
    for receiver, response in responses:
        if isinstance(response, Exception):
            logger.error(
                "Receiver %r of %s failed",
                receiver,
                signal_name,
                exc_info=(type(response), response, response.__traceback__),
            )
