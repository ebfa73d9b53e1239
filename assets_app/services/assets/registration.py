"""Registering the asset changes of a task that succeeded (docs/concepts.md).

One entry point, :func:`asset_changes_register`. It turns the task's declared outlets and the
outlet events it wrote into rows of ``asset_event`` (plus ``asset``, ``asset_alias``,
``asset_alias_asset`` and ``asset_alias_asset_event`` for events emitted through aliases),
queues the consumer DAGs in ``asset_dag_run_queue`` and, once the transaction commits, sends
the ``assets_app.signals`` notifications.

A fixed statement plan
----------------------
A call runs **at most the eight statements** below, on PostgreSQL and on SQLite, whatever the
numbers of outlets and events: one per kind of row it reads or writes. A statement whose row
set would be empty is not sent (a call that declares no outlet runs none; declared assets
without aliases run three on SQLite: 3, 6 and 8). Each statement is set-based: its rows arrive
as **one JSON parameter** (an array of objects) that the SQL expands into a row set (PostgreSQL
``jsonb_to_recordset``, SQLite ``json_each``/``json_extract``), so an empty input is an empty
set and a big one needs no batching. Values that are the same for every row (timestamps, the
task instance's ids) are ordinary parameters. The dialect differences, the
table and column names and the row sets' types live in :mod:`assets_app.services.sql` and come
from the models. In order:

1. ``INSERT`` the assets alias events target, ``ON CONFLICT (name, uri) DO NOTHING``,
   ``RETURNING`` the ones it created;
2. ``INSERT`` the aliases alias events were emitted through, ``ON CONFLICT (name) DO NOTHING``;
3. ``SELECT`` the active assets matching the declared keys, names and uris, and the alias
   targets statement 1 did not create, by (name, uri) (not sent when there are none: a
   thousand new targets are not read twice);
4. ``SELECT`` the aliases by name;
5. ``INSERT`` the alias → asset links, ``ON CONFLICT DO NOTHING`` (PostgreSQL: the links to
   targets statement 1 created are a plain ``INSERT`` of their own, see "Concurrency");
6. ``INSERT`` the events; each planned event gets its exact new id (PostgreSQL: ids drawn from
   the sequence per input row in a CTE; SQLite: ids handed out in insert order, writers being
   serialized);
7. ``INSERT`` the alias → event links;
8. ``INSERT`` the queue rows of every live consumer DAG (found in the same statement over the
   four schedule reference tables) as an upsert (PostgreSQL: those of targets statement 1
   created as a plain ``INSERT``), ``RETURNING`` the queued pairs; on
   PostgreSQL the same statement notifies the schedulers (``pg_notify`` on
   :data:`assets_app.notify.QUEUE_CHANNEL`, delivered when the transaction commits, only if
   it queued something).

PostgreSQL receives fewer: statements whose rows do not depend on each other's run as the
steps of one (``sql.Steps``), so 1 and 2 are one statement (1 its main part, whose
``RETURNING`` rows come back), and 5 to 8 are one. Declared assets
without aliases then cost two statements (3, and 6 with 8), alias events four (three when
statement 1 created every target).

Concurrency
-----------
Rows that several requests may create at once (target assets, aliases, links) are inserted
with ``ON CONFLICT DO NOTHING`` over their unique constraints and read back by natural key in
a later statement. On PostgreSQL (READ COMMITTED) an insert that meets a row another
transaction inserted but has not committed waits for that transaction; once it commits the
insert does nothing and the next statement (a new snapshot) sees the row; if it rolls back,
the insert goes through. Every insert is ordered by the natural key and the tables are always
written in the same order, so two requests cannot deadlock on each other's rows.

Queue rows are upserted (``ON CONFLICT … DO UPDATE``, keeping ``created_at``, the oldest
wait) rather than inserted with ``DO NOTHING``: the update **takes the row lock**, so a
producer whose queue row a scheduler has locked ``FOR UPDATE`` waits for the scheduler. If the
scheduler deleted the row (it consumed the events it could see, not this one, which is not
committed yet), the upsert then inserts a fresh row, which the next pass picks up; ``DO
NOTHING`` would have done nothing without waiting and left the event with no queue row.

The rows of an alias target statement 1 has just created (links and queue rows) cannot be
shared: no other transaction can see the asset before this one commits, so none holds or is
inserting such a row. On PostgreSQL they are plain ``INSERT`` steps of their own, without the
existence probe and the speculative insertion of ``ON CONFLICT`` (about 5 ms of PostgreSQL CPU
less per 1,000 new targets).

On SQLite writers are serialized (``BEGIN IMMEDIATE``), so there is no race at all.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any, NamedTuple

import orjson
from django.db import transaction
from django.db.backends.utils import CursorWrapper
from django.utils import timezone

from assets_app.conditions import ConditionReferences, condition_references
from assets_app.exceptions import AssetRegistrationError
from assets_app.models import (
    Asset,
    AssetActive,
    AssetAlias,
    AssetAliasAsset,
    AssetAliasAssetEvent,
    AssetEvent,
    TaskInstance,
)
from assets_app.outlets import (
    AliasOutletEvent,
    AssetOutletEvent,
    OutletEvent,
    OutletProfile,
    OutletType,
)
from assets_app.services.assets.consumption import (
    Emission,
    consumers_queue,
    consumers_queue_run,
    consumers_queue_steps,
)
from assets_app.services.sql import (
    Dialect,
    Statement,
    Steps,
    columns,
    models_from_rows,
    statements_cursor,
    table,
)
from assets_app.signals import asset_changed, asset_event_emitted
from task_sdk.definitions import DEFAULT_GROUP, AssetUniqueKey

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class EmittedEvent:
    """A saved asset event (``event.asset`` loaded) and the aliases it was emitted through.

    The input of :func:`asset_event_consumers_queue` and :func:`asset_changes_notify`.
    """

    event: AssetEvent
    source_aliases: tuple[AssetAlias, ...] = ()

    @property
    def asset(self) -> Asset:
        """The event's asset (always loaded: the event was just saved with it)."""
        asset = self.event.asset
        if asset is None:
            raise ValueError(f"asset event {self.event.pk} has no asset loaded")
        return asset


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


class _AliasGroup(NamedTuple):  # by the thousand: 0.97 µs to make, a frozen dataclass 1.64
    """Alias events sharing asset, dest_asset_extra, extra and partition key: one event."""

    key: AssetUniqueKey
    extra: dict[str, Any]
    partition_key: str | None
    alias_names: tuple[str, ...]


class _PlannedEvent(NamedTuple):  # as _AliasGroup
    asset: Asset
    extra: dict[str, Any]
    partition_key: str | None
    aliases: tuple[AssetAlias, ...] = ()


# extra per partition key (None: no partition), last write wins as in Airflow's accessors
_ExtrasByPartition = dict[str | None, dict[str, Any]]


# --- the entry point ------------------------------------------------------------------------


def asset_changes_register(
    *,
    task_instance: TaskInstance,
    task_outlets: Sequence[OutletProfile],
    outlet_events: Sequence[OutletEvent],
) -> RegistrationResult:
    """Record the asset events of ``task_instance``'s success and queue consumer DAGs.

    As docs/concepts.md describes it: one event per declared active asset (per declared ref,
    per distinct partition key), one event per group of alias events sharing asset,
    dest_asset_extra, extra and partition key; alias targets and aliases created when missing;
    consumers queued.
    Declared assets or refs that match no active asset are skipped with a warning. Runs the
    statements of the module docstring (at most eight), none when the task declares no outlet.

    Transaction and locks: the execution API calls this inside its ``transaction.atomic()``
    with the task instance row already locked (by the ``UPDATE`` that finished it), so one
    success is registered at most once. This function joins the caller's transaction (no savepoint);
    called outside any transaction it opens its own. On PostgreSQL it may wait for other
    producers' uncommitted rows and for a scheduler holding a queue row. Any database error
    propagates and rolls the whole transaction back. Signals are sent only after the outermost
    transaction commits.
    """
    leaves = [profile.leaf for profile in task_outlets]
    declared = condition_references(*(leaf for leaf in leaves if leaf is not None))
    # a ref of whitespace only can name no asset (task_sdk refuses to build one): unknown
    unknown = [p for p, leaf in zip(task_outlets, leaves, strict=True) if leaf is None]
    if not declared:
        _skipped_warn(task_instance, unknown)
        return RegistrationResult(skipped=tuple(unknown))
    groups, target_extras = _alias_events_group(
        declared=declared, events=[e for e in outlet_events if isinstance(e, AliasOutletEvent)]
    )
    alias_names = sorted({name for group in groups for name in group.alias_names})
    sql = Dialect.current()

    with transaction.atomic(savepoint=False), statements_cursor() as cursor:
        inserting = _alias_targets_insert(sql, extras=target_extras, now=timezone.now())
        # 1 and 2. PostgreSQL: one statement, 1 its main part (whose rows come back), which
        # runs before its steps (2): assets, then aliases, as in dags_declare. SQLite: 2, 1.
        sql.execute_all(cursor, [_aliases_insert(sql, names=alias_names), inserting])
        created = _assets_returned(cursor) if inserting is not None else {}
        active, targets = _assets_select(  # 3
            cursor, sql, declared=declared, targets=[k for k in target_extras if k not in created]
        )
        targets.update(created)
        # created now: their links and queue rows are plain inserts (PostgreSQL)
        fresh = frozenset(a.id for a in created.values())
        aliases = _aliases_select(cursor, sql, names=alias_names)  # 4
        if len(targets) != len(target_extras) or len(aliases) != len(alias_names):
            raise AssetRegistrationError("alias targets or aliases could not be read back")

        planned, skipped = _declared_asset_events_plan(
            declared=declared,
            active=active,
            events=[e for e in outlet_events if isinstance(e, AssetOutletEvent)],
        )
        planned += [
            _PlannedEvent(
                asset=targets[group.key],
                extra=group.extra,
                partition_key=group.partition_key,
                aliases=tuple(aliases[name] for name in group.alias_names),
            )
            for group in groups
        ]
        skipped = unknown + skipped
        _skipped_warn(task_instance, skipped)

        now = timezone.now()  # after any wait on concurrent inserts above
        queue = consumers_queue_steps(  # 8
            sql,
            emissions=_emissions((p.asset, p.aliases, p.partition_key) for p in planned),
            now=now,
            fresh_asset_ids=fresh,
        )
        emitted, queued = _events_insert(  # 6, with 5, 7 and 8 on PostgreSQL
            cursor,
            sql,
            planned=planned,
            task_instance=task_instance,
            now=now,
            along=_alias_asset_links_insert(sql, planned=planned, fresh=fresh),  # 5
            queue=queue,
        )
        if emitted:
            transaction.on_commit(partial(asset_changes_notify, events=emitted), robust=True)

    return RegistrationResult(
        events=tuple(e.event for e in emitted),
        changed_asset_ids=tuple(dict.fromkeys(p.asset.id for p in planned)),  # each emitted
        queued=tuple(queued),
        skipped=tuple(skipped),
    )


# --- planning (no SQL) ----------------------------------------------------------------------


def _skipped_warn(task_instance: TaskInstance, skipped: Sequence[OutletProfile]) -> None:
    if skipped:
        logger.warning(
            "Task %s (%s): no event for declared outlets that are unknown or inactive: %s",
            task_instance,
            task_instance.pk,
            ", ".join(_describe(profile) for profile in skipped),
        )


def _describe(profile: OutletProfile) -> str:
    if profile.type == OutletType.NAME_REF:
        return f"Asset.ref(name={profile.name!r})"
    if profile.type == OutletType.URI_REF:
        return f"Asset.ref(uri={profile.uri!r})"
    return f"Asset(name={profile.name!r}, uri={profile.uri!r})"


#: the standard library's sorted, compact encoder, one for every call
_CANONICAL_JSON = json.JSONEncoder(sort_keys=True, separators=(",", ":"))


def _canonical_json(value: Mapping[str, Any]) -> bytes:
    """``value`` as sorted, compact JSON: a grouping key, equal for equal values.

    ``orjson`` (a tenth of the standard library's cost); what it refuses (integers beyond 64
    bits) goes to the standard library, always, so a value's key never depends on the call.
    """
    if not value:
        return b"{}"  # most dest_asset_extra
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # orjson.JSONEncodeError too
        return _CANONICAL_JSON.encode(value).encode()


def _alias_events_group(
    *, declared: ConditionReferences, events: Sequence[AliasOutletEvent]
) -> tuple[list[_AliasGroup], dict[AssetUniqueKey, dict[str, Any]]]:
    """The alias events of declared aliases as groups, and each target's first dest extra.

    Groups on (asset key, canonical dest_asset_extra, canonical extra, partition key), in
    order of first appearance; each group lists its aliases in order of appearance.
    """
    groups: dict[tuple[AssetUniqueKey, bytes, bytes, str | None], dict[str, None]] = {}
    extras: dict[tuple[AssetUniqueKey, bytes, bytes, str | None], dict[str, Any]] = {}
    target_extras: dict[AssetUniqueKey, dict[str, Any]] = {}  # first dest_asset_extra seen
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
        extras.setdefault(group, event.extra)
        target_extras.setdefault(event.dest_asset_key, event.dest_asset_extra)
    planned = [
        _AliasGroup(
            key=group[0], extra=extras[group], partition_key=group[3], alias_names=tuple(names)
        )
        for group, names in groups.items()
    ]
    return planned, target_extras


def _declared_asset_events_plan(
    *, declared: ConditionReferences, active: Sequence[Asset], events: Sequence[AssetOutletEvent]
) -> tuple[list[_PlannedEvent], list[OutletProfile]]:
    """One event per declared active asset or ref (per partition key), and the skipped ones.

    ``active`` are the active assets matching a declared name or uri (statement 3).
    """
    active_by_key = {AssetUniqueKey(name=a.name, uri=a.uri): a for a in active}
    active_by_name = {a.name: a for a in active}
    active_by_uri = {a.uri: a for a in active}

    extras_by_key: dict[AssetUniqueKey, _ExtrasByPartition] = {}
    extras_by_name: dict[str, _ExtrasByPartition] = {}
    extras_by_uri: dict[str, _ExtrasByPartition] = {}
    for event in events:
        extras_by_key.setdefault(event.key, {})[event.partition_key] = event.extra
        extras_by_name.setdefault(event.key.name, {})[event.partition_key] = event.extra
        extras_by_uri.setdefault(event.key.uri, {})[event.partition_key] = event.extra

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


# --- the statements -------------------------------------------------------------------------
#
# Table and column names below come from the models (``table``/``columns``); a row set's
# members are named after the columns they fill and typed like them (``Dialect.rows``).


#: what a registration reads of an asset; ``created_at`` and ``updated_at`` are left deferred
#: (loaded on access, as after ``.only()``): nothing here reads them, and converting two
#: timestamps per row was a tenth of the CPU of a request with 1,000 alias events
_ASSET_FIELDS = ("id", "name", "uri", "group", "extra")


def _alias_targets_insert(
    sql: Dialect, *, extras: Mapping[AssetUniqueKey, dict[str, Any]], now: datetime
) -> Statement | None:
    """Statement 1: create the missing alias targets, not active, with dest_asset_extra,
    returning the rows it created (:data:`_ASSET_FIELDS`): statement 3 reads only the others.

    Their group is Airflow's default (``asset``), as for an ``Asset`` declared without one.

    ``NOT EXISTS`` skips the targets that exist (no conflict check, no sequence value spent);
    ``ON CONFLICT DO NOTHING`` covers the ones another transaction is inserting right now.
    The check is one probe of the unique index per row (:attr:`Dialect.probe`).
    """
    if not extras:
        return None
    return Statement(
        f"""
        INSERT INTO {table(Asset)} ({
            columns(Asset, "name", "uri", "group", "extra", "created_at", "updated_at")
        })
        SELECT r.name, r.uri, %s, r.extra, %s, %s
        FROM {sql.rows(Asset, ["name", "uri", "extra"])}
        WHERE NOT EXISTS (
            SELECT 1 FROM {table(Asset)} a WHERE a.name = r.name AND a.uri = r.uri {sql.probe}
        )
        ORDER BY r.name, r.uri
        ON CONFLICT ({columns(Asset, "name", "uri")}) DO NOTHING
        RETURNING {columns(Asset, *_ASSET_FIELDS)}
        """,  # noqa: S608 - names from the models, values bound as parameters
        [
            DEFAULT_GROUP,
            sql.datetime(now),
            sql.datetime(now),
            sql.json({"name": k.name, "uri": k.uri, "extra": e} for k, e in extras.items()),
        ],
    )


def _aliases_insert(sql: Dialect, *, names: Sequence[str]) -> Statement | None:
    """Statement 2: create the missing aliases that alias events were emitted through."""
    if not names:
        return None
    return Statement(
        f"""
        INSERT INTO {table(AssetAlias)} ({columns(AssetAlias, "name", "group")})
        SELECT r.name, %s
        FROM {sql.rows(AssetAlias, ["name"])}
        WHERE NOT EXISTS (SELECT 1 FROM {table(AssetAlias)} a WHERE a.name = r.name {sql.probe})
        ORDER BY r.name
        ON CONFLICT ({columns(AssetAlias, "name")}) DO NOTHING
        """,  # noqa: S608 - names from the models, values bound as parameters
        [DEFAULT_GROUP, sql.json({"name": name} for name in names)],
    )


def _assets_returned(cursor: CursorWrapper) -> dict[AssetUniqueKey, Asset]:
    """The alias targets statement 1 created (not active: no ``asset_active`` row can name an
    asset created in this statement), by key."""
    return {
        AssetUniqueKey(name=asset.name, uri=asset.uri): asset
        for asset in models_from_rows(Asset, _ASSET_FIELDS, cursor.fetchall())
    }


def _assets_select(
    cursor: CursorWrapper,
    sql: Dialect,
    *,
    declared: ConditionReferences,
    targets: Iterable[AssetUniqueKey],
) -> tuple[list[Asset], dict[AssetUniqueKey, Asset]]:
    """Statement 3: the active assets matching a declared name or uri, and the alias targets.

    Declared keys match on ``asset_active``'s unique name and uri columns (exact keys are
    checked by :func:`_declared_asset_events_plan`), so at most one active asset per declared
    name and uri comes back. Targets match on ``asset``'s unique (name, uri), active or not.
    Each lookup is an index probe per input row.
    """
    wanted = [{"kind": "declared", "name": k.name, "uri": k.uri} for k in declared.asset_keys]
    wanted += [{"kind": "declared", "name": name} for name in declared.name_refs]
    wanted += [{"kind": "declared", "uri": uri} for uri in declared.uri_refs]
    wanted += [{"kind": "target", "name": k.name, "uri": k.uri} for k in targets]
    if not wanted:
        return [], {}
    picked = ", ".join(f"a.{c}" for c in columns(Asset, *_ASSET_FIELDS).split(", "))
    sql.execute(
        cursor,
        f"""
        WITH wanted AS (SELECT * FROM {sql.rows(Asset, ["name", "uri"], kind="text")})
        SELECT {picked}, act.asset_id IS NOT NULL
        FROM {table(Asset)} a LEFT JOIN {table(AssetActive)} act ON act.asset_id = a.id
        WHERE a.id IN (
            SELECT aa.asset_id FROM {table(AssetActive)} aa
            JOIN wanted w ON w.kind = 'declared' AND aa.name = w.name
            UNION ALL
            SELECT aa.asset_id FROM {table(AssetActive)} aa
            JOIN wanted w ON w.kind = 'declared' AND aa.uri = w.uri
            UNION ALL
            SELECT t.id FROM {table(Asset)} t
            JOIN wanted w ON w.kind = 'target' AND t.name = w.name AND t.uri = w.uri
        )
        """,  # noqa: S608 - names from the models, values bound as parameters
        [sql.json(wanted)],
    )
    active: list[Asset] = []
    found: dict[AssetUniqueKey, Asset] = {}
    rows = cursor.fetchall()
    assets = models_from_rows(Asset, _ASSET_FIELDS, (row[:-1] for row in rows))
    for asset, (*_, is_active) in zip(assets, rows, strict=True):
        found[AssetUniqueKey(name=asset.name, uri=asset.uri)] = asset
        if is_active:
            active.append(asset)
    wanted_targets = set(targets)
    return active, {key: a for key, a in found.items() if key in wanted_targets}


def _aliases_select(
    cursor: CursorWrapper, sql: Dialect, *, names: Sequence[str]
) -> dict[str, AssetAlias]:
    """Statement 4: the aliases alias events were emitted through, by name."""
    if not names:
        return {}
    fields = ("id", "name", "group")
    picked = ", ".join(f"al.{c}" for c in columns(AssetAlias, *fields).split(", "))
    sql.execute(
        cursor,
        f"""
        SELECT {picked} FROM {table(AssetAlias)} al
        WHERE al.name IN (SELECT r.name FROM {sql.rows(AssetAlias, ["name"])})
        """,  # noqa: S608 - names from the models, values bound as parameters
        [sql.json({"name": name} for name in names)],
    )
    return {alias.name: alias for alias in models_from_rows(AssetAlias, fields, cursor.fetchall())}


def _alias_asset_links_insert(
    sql: Dialect, *, planned: Sequence[_PlannedEvent], fresh: Collection[int]
) -> list[Statement]:
    """Statement 5: link each alias to each asset emitted through it, once.

    On PostgreSQL the links to assets in ``fresh`` (created by statement 1 in this
    transaction) are a plain ``INSERT`` of their own: no other transaction can see those
    assets before this one commits, so none can hold or be inserting such a link. Without the
    existence probe and ``ON CONFLICT`` (a speculative insertion per row) 1,000 links cost
    about 3 ms of PostgreSQL CPU less. The others are checked as usual, and so is every link on
    SQLite (one statement: at most eight in all, and its writers are serialized).
    """
    fresh = fresh if sql.postgresql else ()
    links = sorted({(alias.id, p.asset.id) for p in planned for alias in p.aliases})
    new = [link for link in links if link[1] in fresh]
    others = [link for link in links if link[1] not in fresh]
    link_columns = columns(AssetAliasAsset, "alias", "asset")
    rows = sql.rows(AssetAliasAsset, ["alias", "asset"])
    statements = []
    if others:
        statements.append(
            Statement(
                f"""
                INSERT INTO {table(AssetAliasAsset)} ({link_columns})
                SELECT r.alias_id, r.asset_id FROM {rows}
                WHERE NOT EXISTS (
                    SELECT 1 FROM {table(AssetAliasAsset)} l
                    WHERE l.alias_id = r.alias_id AND l.asset_id = r.asset_id {sql.probe}
                )
                ORDER BY r.alias_id, r.asset_id
                ON CONFLICT ({link_columns}) DO NOTHING
                """,  # noqa: S608 - names from the models, values bound as parameters
                [_link_rows(sql, others)],
            )
        )
    if new:
        statements.append(
            Statement(
                f"""
                INSERT INTO {table(AssetAliasAsset)} ({link_columns})
                SELECT r.alias_id, r.asset_id FROM {rows} ORDER BY r.alias_id, r.asset_id
                """,  # noqa: S608 - names from the models, values bound as parameters
                [_link_rows(sql, new)],
            )
        )
    return statements


def _link_rows(sql: Dialect, links: Iterable[tuple[int, int]]) -> str:
    return sql.json({"alias_id": alias_id, "asset_id": asset_id} for alias_id, asset_id in links)


_EVENT_SOURCE_FIELDS = ("source_dag_id", "source_task_id", "source_run_id", "source_map_index")
_EVENT_ROW_FIELDS = ("asset", "extra", "partition_key")


def _events_insert(
    cursor: CursorWrapper,
    sql: Dialect,
    *,
    planned: Sequence[_PlannedEvent],
    task_instance: TaskInstance,
    now: datetime,
    along: Sequence[Statement] = (),
    queue: Steps | None = None,
) -> tuple[list[EmittedEvent], list[tuple[int, str]]]:
    """Statement 6: insert every event and return them saved, each with its exact new id, and
    queue their consumers (``queue``, statement 8): the events and the queued pairs.

    PostgreSQL: one statement (:func:`_events_steps`) that also runs ``along`` (statement 5's),
    links the events to their aliases (7) and upserts the queue rows (8); it returns the
    events' ids and then the queued pairs. SQLite: writers are serialized and
    ``AUTOINCREMENT`` hands out ids in insert order, which ``ORDER BY r.n`` fixes, so the
    sorted new ids are the plan's; ``along`` runs first, statements 7 and 8 after. Either way
    the asset of each new row is checked against the plan.
    """
    if not planned:
        return [], []
    source = [getattr(task_instance, f.removeprefix("source_")) for f in _EVENT_SOURCE_FIELDS]
    constants = [*source, sql.datetime(now)]
    planned_rows = sql.json(
        {"n": n, "asset_id": p.asset.id, "extra": p.extra, "partition_key": p.partition_key}
        for n, p in enumerate(planned)
    )
    if sql.postgresql:
        statement = _events_steps(
            sql, planned=planned, rows=[planned_rows, *constants], along=along, queue=queue
        ).statement()
        sql.execute(cursor, statement.text, statement.params)
        rows = cursor.fetchall()
        new = sorted((n, pk, asset_id) for n, pk, asset_id, _ in rows if n is not None)
        queued = sorted((asset_id, dag_id) for n, _, asset_id, dag_id in rows if n is None)
    else:
        statement = Statement(
            f"""
            INSERT INTO {table(AssetEvent)} ({_event_columns()})
            SELECT {_EVENT_VALUES} FROM {_event_rows(sql)} ORDER BY r.n
            RETURNING id, id, asset_id
            """,  # noqa: S608 - names from the models, values bound as parameters
            [*constants, planned_rows],
        )
        sql.execute_all(cursor, [*along, statement])
        # ids in plan order: the n-th smallest id is the n-th planned event
        new = [(n, pk, asset_id) for n, (pk, _, asset_id) in enumerate(sorted(cursor.fetchall()))]
    if [(n, asset_id) for n, _, asset_id in new] != [
        (n, p.asset.id) for n, p in enumerate(planned)
    ]:
        raise AssetRegistrationError("inserted events could not be matched to the plan")
    events = models_from_rows(
        AssetEvent,
        ("id", *_EVENT_ROW_FIELDS, *_EVENT_SOURCE_FIELDS, "timestamp"),
        (
            (pk, p.asset.id, p.extra, p.partition_key, *source, now)
            for (_, pk, _), p in zip(new, planned, strict=True)
        ),
        from_database=False,
    )
    emitted = []
    cache_asset = AssetEvent._meta.get_field("asset").set_cached_value  # asset_id is set
    for event, p in zip(events, planned, strict=True):
        cache_asset(event, p.asset)
        emitted.append(EmittedEvent(event=event, source_aliases=p.aliases))
    if not sql.postgresql:
        _alias_event_links_insert(cursor, sql, emitted=emitted)  # 7
        queued = consumers_queue_run(sql, queue)  # 8
    return emitted, queued


_EVENT_VALUES = "r.asset_id, r.extra, r.partition_key, %s, %s, %s, %s, %s"


def _event_columns() -> str:
    """The columns :data:`_EVENT_VALUES` fill."""
    return columns(AssetEvent, *_EVENT_ROW_FIELDS, *_EVENT_SOURCE_FIELDS, "timestamp")


def _event_rows(sql: Dialect) -> str:
    return sql.rows(AssetEvent, _EVENT_ROW_FIELDS, n="integer")


def _events_steps(
    sql: Dialect,
    *,
    planned: Sequence[_PlannedEvent],
    rows: Sequence[Any],
    along: Sequence[Statement],
    queue: Steps | None,
) -> Steps:
    """Statements 5 to 8 as one PostgreSQL statement, in steps. ``r`` draws one id per planned
    event from the table's sequence (``nextval`` makes it volatile, so the step is evaluated
    once), ``inserted`` uses those ids, and the statement returns ``(n, id, asset_id, NULL)``
    from ``r`` (no reliance on insert or ``RETURNING`` order); ``linked`` links the events to
    their aliases (the ids are known in ``r``); the queue's steps follow, and its queued pairs
    come back as ``(NULL, NULL, asset_id, dag_id)``. ``rows``: the planned rows' JSON and the
    constants of :data:`_EVENT_VALUES`."""
    steps = [(f"alias_links{n}", statement) for n, statement in enumerate(along)]
    steps += [
        (
            "r",
            Statement(
                f"SELECT r.*, {sql.next_ids(AssetEvent)} AS id FROM {_event_rows(sql)}",  # noqa: S608 - names from the models, values bound as parameters
                rows[:1],
            ),
        ),
        (
            "inserted",
            Statement(
                f"""
                INSERT INTO {table(AssetEvent)} ({columns(AssetEvent, "id")}, {_event_columns()})
                SELECT r.id, {_EVENT_VALUES} FROM r ORDER BY r.n
                """,  # noqa: S608 - names from the models, values bound as parameters
                rows[1:],
            ),
        ),
    ]
    links = sorted((n, alias.id) for n, p in enumerate(planned) for alias in p.aliases)
    if links:
        link_rows = sql.rows(AssetAliasAssetEvent, ["alias"], n="integer")
        link = Statement(
            f"""
            INSERT INTO {table(AssetAliasAssetEvent)}
                ({columns(AssetAliasAssetEvent, "event", "alias")})
            SELECT r.id, l.alias_id FROM r JOIN (SELECT * FROM {link_rows}) l ON l.n = r.n
            ORDER BY r.id, l.alias_id
            """,  # noqa: S608 - names from the models, values bound as parameters
            [sql.json({"n": n, "alias_id": a} for n, a in links)],
        )
        steps.append(("linked", link))
    events = Steps(
        steps=tuple(steps), last=Statement("SELECT r.n, r.id, r.asset_id, NULL FROM r", [])
    )
    if queue is None:
        return events
    return events.then(
        queue,
        last=Statement(
            f"""
            {events.last.text}
            UNION ALL
            SELECT NULL, NULL, q.asset_id, q.target_dag_id FROM ({queue.last.text}) q
            """,  # noqa: S608 - names from the models, values bound as parameters
            queue.last.params,
        ),
    )


def _alias_event_links_insert(
    cursor: CursorWrapper, sql: Dialect, *, emitted: Sequence[EmittedEvent]
) -> None:
    """Statement 7 (SQLite; on PostgreSQL statement 6 does it): link each new event to the
    aliases it was emitted through."""
    links = sorted((e.event.id, alias.id) for e in emitted for alias in e.source_aliases)
    if not links:
        return
    sql.execute(
        cursor,
        f"""
        INSERT INTO {table(AssetAliasAssetEvent)}
            ({columns(AssetAliasAssetEvent, "event", "alias")})
        SELECT r.event_id, r.alias_id
        FROM {sql.rows(AssetAliasAssetEvent, ["event", "alias"])}
        ORDER BY r.event_id, r.alias_id
        """,  # noqa: S608 - names from the models, values bound as parameters
        [sql.json({"event_id": event_id, "alias_id": alias_id} for event_id, alias_id in links)],
    )


# --- shared with the manual event of ``asset_events`` ----------------------------------------


def asset_event_consumers_queue(
    *, events: Sequence[EmittedEvent], now: datetime
) -> list[tuple[int, str]]:
    """Queue every live consumer DAG of ``events`` (:func:`consumption.consumers_queue`, one
    statement); the queued ``(asset_id, dag_id)`` pairs. Call it inside the transaction that
    inserted ``events``."""
    return consumers_queue(
        emissions=_emissions((e.asset, e.source_aliases, e.event.partition_key) for e in events),
        now=now,
    )


def _emissions(
    events: Iterable[tuple[Asset, Sequence[AssetAlias], str | None]],
) -> list[Emission]:
    """What :mod:`consumption` needs of events: (asset, source aliases, partition key) each."""
    return [
        Emission(
            asset_id=asset.id,
            alias_id=alias_id,
            name=asset.name,
            uri=asset.uri,
            partition_key=partition_key,
        )
        for asset, aliases, partition_key in events
        for alias_id in _source_alias_ids(aliases)
    ]


def _source_alias_ids(aliases: Sequence[AssetAlias]) -> list[int | None]:
    """The ids of the aliases an event was emitted through; ``[None]`` when emitted directly."""
    return [alias.id for alias in aliases] or [None]


def asset_changes_notify(*, events: Sequence[EmittedEvent]) -> None:
    """Send the signals for ``events``; log, never raise, receiver errors.

    ``asset_changed`` once per asset that got an event, then ``asset_event_emitted`` once per
    event. Meant for ``transaction.on_commit``: receivers must only see committed rows. A
    signal nobody receives is not sent (no loop over 1,000 events for nothing).
    """
    if asset_changed.has_listeners(Asset):
        for asset in _changed_assets(events):
            _log_failures(asset_changed.send_robust(sender=Asset, asset=asset), "asset_changed")
    if not asset_event_emitted.has_listeners(AssetEvent):
        return
    for e in events:
        responses = asset_event_emitted.send_robust(
            sender=AssetEvent,
            event=e.event,
            source_alias_names=tuple(alias.name for alias in e.source_aliases),
        )
        _log_failures(responses, "asset_event_emitted")


def _changed_assets(events: Sequence[EmittedEvent]) -> list[Asset]:
    return list({e.asset.id: e.asset for e in events}.values())


def _log_failures(responses: list[tuple[Any, Any]], signal_name: str) -> None:
    for receiver, response in responses:
        if isinstance(response, Exception):
            logger.error(
                "Receiver %r of %s failed",
                receiver,
                signal_name,
                exc_info=(type(response), response, response.__traceback__),
            )
