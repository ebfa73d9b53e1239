"""The scheduling rules of asset-triggered runs, in one place: **who gets queued** when an event
is emitted (:func:`consumers_queue`), **when a DAG is ready** (its condition over its queued
assets: :func:`condition_of`, :func:`condition_resolve` and
:func:`assets_app.conditions.condition_is_met`), and **what a run consumes**
(:func:`unconsumed_event_ids`, the set-based SQL form that creates runs, and
:func:`next_run_events`, the same rule as an ORM filter, which finds the events still waiting
for a consumer: :func:`events_awaiting_consumers` for the prune, :func:`consumers_awaiting`
per event for the admin). The two forms of the consumption rule, and the admin's and the
prune's answers, are held to the same cases by ``tests/assets_app/assets/test_consumption.py``.

:mod:`assets_app.services.scheduling.scheduler` applies these rules under locks; registration
and the manual event queue consumers through :func:`consumers_queue`.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple, TypeVar

from django.db.models import (
    BooleanField,
    Exists,
    ExpressionWrapper,
    Max,
    OuterRef,
    Q,
    Subquery,
)

from assets_app.conditions import (
    Condition,
    ConditionReferences,
    Resolution,
    condition_parse,
    condition_references,
)
from assets_app.exceptions import InvalidAssetExpression
from assets_app.models import (
    Asset,
    AssetActive,
    AssetAlias,
    AssetAliasAsset,
    AssetAliasAssetEvent,
    AssetDagRunQueue,
    AssetEvent,
    Dag,
    DagRun,
    DagRunAssetEvent,
    DagRunType,
    DagScheduleAssetAliasReference,
    DagScheduleAssetNameReference,
    DagScheduleAssetReference,
    DagScheduleAssetUriReference,
)
from assets_app.notify import QUEUE_CHANNEL, notify_sql
from assets_app.services.sql import Dialect, Statement, Steps, columns, of, statements_cursor, table
from task_sdk.definitions import AssetUniqueKey

K = TypeVar("K")
V = TypeVar("V")

#: How far before the previous asset-triggered run the event scan starts. An event is missed
#: only if its producer's transaction stayed open longer than this (requests time out long
#: before).
EVENT_LOOKBACK = timedelta(minutes=10)
#: The lower bound of a DAG's first run's scan: the whole history, as an index range like any
#: other bound (``(asset_id, timestamp)``), not a condition read from every event of the asset.
_BEGINNING = datetime(1, 1, 2, tzinfo=UTC)


# --- who gets queued ---------------------------------------------------------------------


class Emission(NamedTuple):
    """An emitted event as its consumers are found: its asset, the alias it came through (if
    any) and its partition key. A tuple: a request makes one per alias event, by the
    thousand."""

    asset_id: int
    alias_id: int | None
    name: str
    uri: str
    partition_key: str | None = None


#: The step of :func:`consumers_queue_steps` that upserts the queue rows and returns the queued
#: ``(asset_id, target_dag_id)`` pairs, for a statement that joins it.
QUEUED_STEP = "queued"
#: The step that inserts the queue rows of assets created in the same transaction (PostgreSQL).
QUEUED_FRESH_STEP = "queued_fresh"


def consumers_queue(*, emissions: Iterable[Emission], now: datetime) -> list[tuple[int, str]]:
    """Queue every live consumer DAG of the events ``emissions`` describe, once per (asset,
    DAG): one statement (:func:`consumers_queue_steps`). Returns the queued ``(asset_id,
    dag_id)`` pairs, sorted, whether inserted now or already waiting.

    Call it inside the transaction that inserted the events. On PostgreSQL the upsert locks
    each queue row until that transaction ends, and waits for a scheduler that has locked one
    (``FOR UPDATE``); if the scheduler deleted it, a fresh row is inserted. See the module
    docstring of :mod:`assets_app.services.scheduling.scheduler`.
    """
    sql = Dialect.current()
    return consumers_queue_run(sql, consumers_queue_steps(sql, emissions=emissions, now=now))


def consumers_queue_run(sql: Dialect, steps: Steps | None) -> list[tuple[int, str]]:
    """Run the statement of :func:`consumers_queue_steps` on its own: the queued pairs."""
    if steps is None:
        return []
    statement = steps.statement()
    with statements_cursor() as cursor:
        sql.execute(cursor, statement.text, statement.params)
        return sorted((asset_id, dag_id) for asset_id, dag_id, *_ in cursor.fetchall())


def consumers_queue_steps(
    sql: Dialect,
    *,
    emissions: Iterable[Emission],
    now: datetime,
    fresh_asset_ids: Collection[int] = frozenset(),
) -> Steps | None:
    """The statement that queues the consumers of ``emissions`` (``None``: nothing can be
    queued), as steps another statement can join (registration joins it to the insert of the
    events): ``emitted``, ``consumer`` and, on PostgreSQL, :data:`QUEUED_STEP` (and
    :data:`QUEUED_FRESH_STEP`); its last part returns the queued pairs.

    A DAG consumes an event when it is neither paused nor stale and schedules on the event's
    asset, on one of its source aliases, or on a name/uri reference to the asset. An event
    with a partition key does not queue non-partitioned consumers, and no DAG is partitioned
    yet (the model has no such flag), so partitioned events queue nothing.

    Each consumer's DAG row is checked by a subquery, which PostgreSQL cannot turn into a join:
    it plans the JSON row set as 100 rows, and a join then read the whole ``dag`` table on every
    event; the subquery is one index lookup per consumer.

    The queue rows are upserted in (asset, DAG) order; an existing row keeps its
    ``created_at`` (the oldest wait). On PostgreSQL the statement also wakes the schedulers
    when its transaction commits (one notification however many rows: PostgreSQL folds a
    transaction's identical ones), in the last part: ``pg_notify`` per queued row.

    ``fresh_asset_ids`` (PostgreSQL; ignored on SQLite, whose upsert stays one statement):
    assets created in the caller's transaction, which no other transaction can see yet, so no
    queue row on them exists or can be inserted meanwhile. Their rows are a plain ``INSERT``
    (:data:`QUEUED_FRESH_STEP`): no speculative insertion per row (about 2.5 ms of PostgreSQL
    CPU less per 1,000 rows). Without such rows the statement is the upsert alone, with only
    such rows the plain insert alone. With both, the rows of ``emitted`` are marked and each
    insert filters ``consumer`` on the mark; read twice, ``consumer`` is materialized, which
    keeps the filters out of it. Pushed down into the row set's scan, a filter would lower its
    estimate from 100 rows to 1, and for one row PostgreSQL plans the joins with the reference
    tables as nested loops.
    """
    emitted = sorted(
        {(e.asset_id, e.alias_id, e.name, e.uri) for e in emissions if e.partition_key is None},
        key=lambda row: (row[0], row[1] or 0),
    )
    if not emitted:
        return None
    fresh_rows = [sql.postgresql and asset_id in fresh_asset_ids for asset_id, *_ in emitted]
    mixed = any(fresh_rows) and not all(fresh_rows)
    flag = {"fresh": "boolean"} if mixed else {}
    rows = sql.rows(AssetEvent, ["asset"], alias_id="bigint", name="text", uri="text", **flag)
    queue_columns = columns(AssetDagRunQueue, "asset", "target_dag", "created_at")

    def queue_insert(*, checked: bool, only: str = "") -> Statement:
        conflict = (
            f"""ON CONFLICT ({columns(AssetDagRunQueue, "asset", "target_dag")})
            DO UPDATE SET created_at = q.created_at"""
            if checked
            else ""
        )
        return Statement(
            f"""
            INSERT INTO {table(AssetDagRunQueue)} AS q ({queue_columns})
            SELECT c.asset_id, c.dag_id, %s
            FROM consumer c
            WHERE {only} (
                SELECT NOT d.is_paused AND NOT d.is_stale FROM {table(Dag)} d
                WHERE d.dag_id = c.dag_id
            )
            ORDER BY c.asset_id, c.dag_id
            {conflict}
            RETURNING asset_id, target_dag_id
            """,  # noqa: S608 - names from the models, values bound as parameters
            [sql.datetime(now)],
        )

    columns_of_e = "e.asset_id, s.dag_id, e.fresh" if mixed else "e.asset_id, s.dag_id"
    steps = (
        (
            "emitted",
            Statement(
                f"SELECT * FROM {rows}",  # noqa: S608 - names from the models, values bound as parameters
                [
                    sql.json(
                        {"asset_id": asset_id, "alias_id": alias_id, "name": name, "uri": uri}
                        | ({"fresh": True} if mixed and is_fresh else {})
                        for (asset_id, alias_id, name, uri), is_fresh in zip(
                            emitted, fresh_rows, strict=True
                        )
                    )
                ],
            ),
        ),
        (
            "consumer",
            Statement(
                f"""
                SELECT {columns_of_e} FROM emitted e
                JOIN {table(DagScheduleAssetReference)} s ON s.asset_id = e.asset_id
                UNION
                SELECT {columns_of_e} FROM emitted e
                JOIN {table(DagScheduleAssetAliasReference)} s ON s.alias_id = e.alias_id
                UNION
                SELECT {columns_of_e} FROM emitted e
                JOIN {table(DagScheduleAssetNameReference)} s ON s.name = e.name
                UNION
                SELECT {columns_of_e} FROM emitted e
                JOIN {table(DagScheduleAssetUriReference)} s ON s.uri = e.uri
                """,  # noqa: S608 - names from the models, values bound as parameters
                [],
            ),
        ),
    )
    if not sql.postgresql:
        return Steps(steps=steps, last=queue_insert(checked=True))
    if mixed:
        queued = [
            (QUEUED_STEP, queue_insert(checked=True, only="c.fresh IS NULL AND")),
            (QUEUED_FRESH_STEP, queue_insert(checked=False, only="c.fresh AND")),
        ]
    elif all(fresh_rows):
        queued = [(QUEUED_FRESH_STEP, queue_insert(checked=False))]
    else:
        queued = [(QUEUED_STEP, queue_insert(checked=True))]
    notify = notify_sql(QUEUE_CHANNEL)
    return Steps(
        steps=(*steps, *queued),
        last=Statement(
            " UNION ALL ".join(
                f"SELECT asset_id, target_dag_id, {notify} FROM {name}"  # noqa: S608 - fixed names
                for name, _ in queued
            ),
            [],
        ),
    )


# --- when a DAG is ready -----------------------------------------------------------------


#: dag_id → (its asset_expression as stored, parsed, what it mentions): parsing is most of
#: evaluating (the grammar checks every name and normalizes every uri), and every pass and
#: batch gathers what its DAGs' conditions mention.
_parsed: dict[str, tuple[Any, Condition, ConditionReferences]] = {}


def condition_of(dag_id: str, expression: Any) -> Condition:
    """The condition of ``expression`` as stored (the JSON text a statement reads, or the
    document the ORM decodes), remembered per DAG while its expression is the same."""
    cached = _parsed.get(dag_id)
    if cached is not None and cached[0] == expression:
        return cached[1]
    document = expression
    if isinstance(expression, str):
        try:
            document = json.loads(expression)
        except ValueError as exc:
            raise InvalidAssetExpression(f"not JSON: {exc}") from exc
    condition = condition_parse(document)
    _parsed[dag_id] = (expression, condition, condition_references(condition))
    return condition


def references_of(conditions: Mapping[str, Condition]) -> ConditionReferences:
    """What the conditions of DAGs (``dag_id`` → its condition) mention together:
    ``condition_references(*conditions.values())``, from what :func:`condition_of`
    remembered of each."""
    return ConditionReferences.union(
        _references_of(dag_id, condition) for dag_id, condition in conditions.items()
    )


def _references_of(dag_id: str, condition: Condition) -> ConditionReferences:
    """``condition_references(condition)``, remembered if :func:`condition_of` made it."""
    cached = _parsed.get(dag_id)
    if cached is not None and cached[1] is condition:
        return cached[2]
    return condition_references(condition)


def condition_resolve(references: ConditionReferences) -> Resolution:
    """Look up the asset ids of a condition's assets, aliases and refs (≤ 1 statement: an
    index probe per name, key or alias, the names passed as one JSON row set)."""
    wanted = [{"kind": "key", "name": k.name, "uri": k.uri} for k in references.asset_keys]
    wanted += [{"kind": "alias", "name": name} for name in references.alias_names]
    wanted += [{"kind": "name", "name": name} for name in references.name_refs]
    wanted += [{"kind": "uri", "uri": uri} for uri in references.uri_refs]
    if not wanted:
        return Resolution()
    asset_ids: dict[AssetUniqueKey, int] = {}
    alias_asset_ids: dict[str, set[int]] = {}
    name_ref_ids: dict[str, int] = {}
    uri_ref_ids: dict[str, int] = {}
    sql = Dialect.current()
    a, act, al, link = (
        of("a", Asset),
        of("act", AssetActive),
        of("al", AssetAlias),
        of("l", AssetAliasAsset),
    )
    with statements_cursor() as cursor:
        sql.execute(
            cursor,
            f"""
            WITH w AS (SELECT * FROM {sql.rows(Asset, ["name", "uri"], kind="text")})
            SELECT 'key', {a("id")}, w.name, w.uri FROM w JOIN {table(Asset)} a
                ON w.kind = 'key' AND {a("name")} = w.name AND {a("uri")} = w.uri
            UNION ALL
            SELECT 'alias', {link("asset")}, w.name, NULL FROM w JOIN {table(AssetAlias)} al
                ON w.kind = 'alias' AND {al("name")} = w.name
                JOIN {table(AssetAliasAsset)} l ON {link("alias")} = {al("id")}
            UNION ALL
            SELECT 'name', {act("asset")}, w.name, NULL FROM w JOIN {table(AssetActive)} act
                ON w.kind = 'name' AND {act("name")} = w.name
            UNION ALL
            SELECT 'uri', {act("asset")}, NULL, w.uri FROM w JOIN {table(AssetActive)} act
                ON w.kind = 'uri' AND {act("uri")} = w.uri
            """,  # noqa: S608 - names from the models, values bound as parameters
            [sql.json(wanted)],
        )
        for kind, asset_id, name, uri in cursor.fetchall():
            if kind == "key":
                asset_ids[AssetUniqueKey(name=name, uri=uri)] = asset_id
            elif kind == "alias":
                alias_asset_ids.setdefault(name, set()).add(asset_id)
            elif kind == "name":
                name_ref_ids[name] = asset_id
            else:
                uri_ref_ids[uri] = asset_id
    return Resolution(
        asset_ids=asset_ids,
        alias_asset_ids=alias_asset_ids,
        name_ref_ids=name_ref_ids,
        uri_ref_ids=uri_ref_ids,
    )


# --- what a run consumes -----------------------------------------------------------------


def latest_asset_triggered_run() -> Subquery:
    """When the latest asset-triggered run of the DAG ``OuterRef("dag_id")`` was created
    (``NULL``: it has none): where the events its next run consumes start (see
    ``EVENT_LOOKBACK``)."""
    return Subquery(
        DagRun.objects.filter(dag_id=OuterRef("dag_id"), run_type=DagRunType.ASSET_TRIGGERED)
        .order_by()
        .values("dag_id")
        .annotate(latest=Max("created_at"))
        .values("latest")
    )


def latest_asset_triggered_runs(dag_ids: Collection[str]) -> dict[str, datetime]:
    """:func:`latest_asset_triggered_run` of each of ``dag_ids`` that has one (1 query)."""
    return {
        dag_id: latest
        for dag_id, latest in Dag.objects.filter(dag_id__in=dag_ids)
        .annotate(latest=latest_asset_triggered_run())
        .values_list("dag_id", "latest")
        if latest is not None
    }


def unconsumed_event_ids(
    *,
    conditions: Mapping[str, Condition],
    resolution: Resolution,
    previous: Mapping[str, datetime | None],
) -> dict[str, list[int]]:
    """Per DAG, the ids of the events its new run consumes, oldest first (≤ 1 query).

    ``previous``: when each DAG's latest asset-triggered run was created
    (:func:`latest_asset_triggered_runs`; the scheduler reads it with the DAG's lock), absent or
    ``None`` if it has none.

    The set-based SQL form of :func:`next_run_events`
    (``tests/assets_app/assets/test_consumption.py`` holds the two to the same cases):
    events on the assets the condition names directly or by ref, and events emitted through one
    of its aliases; not partitioned; not consumed by an earlier run of the DAG; stamped later
    than ``EVENT_LOOKBACK`` before its latest asset-triggered run was created, if it has one.
    """
    if not conditions:
        return {}
    sql = Dialect.current()
    wanted: list[dict[str, Any]] = []
    for dag_id, condition in conditions.items():
        references = _references_of(dag_id, condition)
        latest = previous.get(dag_id)
        after = sql.json_datetime(_BEGINNING if latest is None else latest - EVENT_LOOKBACK)
        direct = {resolution.asset_ids.get(key) for key in references.asset_keys}
        direct |= {resolution.name_ref_ids.get(name) for name in references.name_refs}
        direct |= {resolution.uri_ref_ids.get(uri) for uri in references.uri_refs}
        direct.discard(None)
        wanted += [{"dag_id": dag_id, "asset_id": asset_id, "after": after} for asset_id in direct]
        wanted += [
            {"dag_id": dag_id, "asset_id": asset_id, "alias": alias, "after": after}
            for alias in sorted(references.alias_names)
            for asset_id in resolution.alias_asset_ids.get(alias, ())
        ]
    if not wanted:
        return {}
    rows = sql.rows(dag_id="text", asset_id="bigint", alias="text", after="timestamptz")
    e, link, a = of("e", AssetEvent), of("l", AssetAliasAssetEvent), of("a", AssetAlias)
    c = of("c", DagRunAssetEvent)
    with statements_cursor() as cursor:
        sql.execute(
            cursor,
            f"""
            SELECT r.dag_id, {e("id")} FROM {rows}
            JOIN {table(AssetEvent)} e ON {e("asset")} = r.asset_id
            AND {e("timestamp")} > r.after
            WHERE {e("partition_key")} IS NULL
            AND (r.alias IS NULL OR EXISTS (
                SELECT 1 FROM {table(AssetAliasAssetEvent)} l
                JOIN {table(AssetAlias)} a ON {a("id")} = {link("alias")}
                WHERE {link("event")} = {e("id")} AND {a("name")} = r.alias))
            AND NOT EXISTS (
                SELECT 1 FROM {table(DagRunAssetEvent)} c
                WHERE {c("event")} = {e("id")} AND {c("dag_id")} = r.dag_id {sql.probe})
            ORDER BY r.dag_id, {e("timestamp")}, {e("id")}
            """,  # noqa: S608 - names from the models, values bound as parameters
            [sql.json(wanted)],
        )
        found: dict[str, dict[int, None]] = {}
        for dag_id, event_id in cursor.fetchall():
            found.setdefault(dag_id, {})[event_id] = None  # the same event via two leaves: once
    return {dag_id: list(ids) for dag_id, ids in found.items()}


def next_run_events(
    *,
    dag_id: str,
    alias_names: Collection[str],
    resolution: Resolution,
    previous_run_at: datetime | None,
) -> Q:
    """The events the next asset-triggered run of ``dag_id`` consumes, as a filter on events.

    What a run consumes (step 3 of the scheduler's module docstring) as an ORM filter, used to
    find the events still waiting for a consumer (:func:`events_awaiting_consumers`); runs are
    created with its set-based SQL form, :func:`unconsumed_event_ids`, held to it by one test.
    ``previous_run_at``: when the DAG's latest asset-triggered run was created, if any.
    """
    resolved_ids = resolution.all_asset_ids()
    if not resolved_ids:
        return Q(pk__in=[])
    wanted = Q(asset_id__in=resolution.direct_asset_ids())
    if any(resolution.alias_asset_ids.values()):
        wanted |= Q(
            Exists(
                AssetAliasAssetEvent.objects.filter(
                    event_id=OuterRef("pk"), alias__name__in=alias_names
                )
            )
        )
    events = (
        wanted & Q(asset_id__in=resolved_ids, partition_key__isnull=True) & ~consumed_by(dag_id)
    )
    if previous_run_at is not None:
        events &= Q(timestamp__gt=previous_run_at - EVENT_LOOKBACK)
    return events


@dataclass(frozen=True)
class AwaitingDag:
    """A queued DAG and the events its next asset-triggered run consumes."""

    dag_id: str
    is_paused: bool
    #: the events, as a filter on events
    events: Q
    #: the assets they can be on (an event on any other asset is not among them)
    asset_ids: frozenset[int]


def awaiting_dags() -> list[AwaitingDag]:
    """Every **queued** DAG, by ``dag_id``, with the events its next run would consume.

    A DAG is queued when it has ``asset_dag_run_queue`` rows, paused and stale DAGs included
    (their rows wait for them). The events its next asset-triggered run consumes are exactly
    those of :func:`next_run_events`: on an asset its schedule names directly or by ref, or
    emitted through one of its aliases; without a partition key; consumed by no run of that
    DAG yet; and, once the DAG has had an asset-triggered run, stamped later than
    ``EVENT_LOOKBACK`` before the latest one was created (older events are never consumed).
    A DAG that is no longer asset-scheduled waits for nothing (the scheduler drops its rows);
    one whose stored expression cannot be read keeps every event on its queued assets that no
    run of it consumed. 1 query without queued DAGs, else 2-3 (the DAGs with their latest
    runs; their assets' ids; the queued assets of those whose expression cannot be read).
    """
    queued = (
        Dag.objects.filter(
            Exists(AssetDagRunQueue.objects.filter(target_dag_id=OuterRef("dag_id"))),
            asset_expression__isnull=False,
        )
        .annotate(previous_run_at=latest_asset_triggered_run())
        .order_by("dag_id")
        .values_list("dag_id", "is_paused", "asset_expression", "previous_run_at")
    )
    dags: dict[str, tuple[bool, datetime | None]] = {}
    conditions: dict[str, Condition] = {}
    unreadable: dict[str, set[int]] = {}  # dag_id -> its queued assets
    for dag_id, is_paused, expression, previous_run_at in queued:
        dags[dag_id] = (is_paused, previous_run_at)
        try:
            conditions[dag_id] = condition_of(dag_id, expression)
        except InvalidAssetExpression:
            unreadable[dag_id] = set()
    if unreadable:
        for dag_id, asset_id in AssetDagRunQueue.objects.filter(
            target_dag_id__in=unreadable
        ).values_list("target_dag_id", "asset_id"):
            unreadable[dag_id].add(asset_id)
    resolution = condition_resolve(references_of(conditions))
    awaiting: list[AwaitingDag] = []
    for dag_id, (is_paused, previous_run_at) in dags.items():
        condition = conditions.get(dag_id)
        if condition is None:
            asset_ids = frozenset(unreadable[dag_id])
            events = Q(asset_id__in=asset_ids) & ~consumed_by(dag_id)
        else:
            references = _references_of(dag_id, condition)
            own = resolution_restrict(resolution, references)
            asset_ids = frozenset(own.all_asset_ids())
            events = next_run_events(
                dag_id=dag_id,
                alias_names=references.alias_names,
                resolution=own,
                previous_run_at=previous_run_at,
            )
        awaiting.append(AwaitingDag(dag_id, is_paused, events, asset_ids))
    return awaiting


def events_awaiting_consumers() -> Q:
    """A filter on events: those the next run of some queued DAG would consume
    (:func:`awaiting_dags`; evaluated now: 1 query without queued DAGs, else 2-3)."""
    awaited = Q(pk__in=[])
    for dag in awaiting_dags():
        awaited |= dag.events
    return awaited


#: At most this many DAGs are asked about in one query of :func:`consumers_awaiting` (a column
#: each; SQLite allows 2,000).
AWAITING_DAGS_PER_QUERY = 200


def consumers_awaiting(events: Iterable[AssetEvent]) -> dict[int, list[AwaitingDag]]:
    """Per event id, the queued DAGs whose next run consumes the event, by ``dag_id``:
    :func:`events_awaiting_consumers` told apart by DAG, for the events a page shows.

    No query without events; else those of :func:`awaiting_dags`, then one that asks each
    DAG that could consume one of them (its assets include an event's asset) about every event
    at once, a column per DAG (one more query per :data:`AWAITING_DAGS_PER_QUERY` such DAGs).
    """
    events = list(events)
    found: dict[int, list[AwaitingDag]] = {event.pk: [] for event in events}
    if not events:
        return found
    asset_ids = {event.asset_id for event in events if event.asset_id is not None}
    candidates = [dag for dag in awaiting_dags() if dag.asset_ids & asset_ids]
    for start in range(0, len(candidates), AWAITING_DAGS_PER_QUERY):
        part = candidates[start : start + AWAITING_DAGS_PER_QUERY]
        flags = {
            f"awaited_by_{index}": ExpressionWrapper(dag.events, output_field=BooleanField())
            for index, dag in enumerate(part)
        }
        for pk, *awaited in (
            AssetEvent.objects.filter(pk__in=found)
            .annotate(**flags)
            .order_by()
            .values_list("pk", *flags)
        ):
            found[pk] += [dag for dag, is_awaited in zip(part, awaited, strict=True) if is_awaited]
    return found


def consumed_by(dag_id: str) -> Q:
    """Events some run of ``dag_id`` consumed."""
    return Q(Exists(DagRunAssetEvent.objects.filter(event_id=OuterRef("pk"), dag_id=dag_id)))


def resolution_restrict(resolution: Resolution, references: ConditionReferences) -> Resolution:
    """The part of a resolution shared by many DAGs that one DAG's condition refers to."""
    return Resolution(
        asset_ids=_part(resolution.asset_ids, references.asset_keys),
        alias_asset_ids=_part(resolution.alias_asset_ids, references.alias_names),
        name_ref_ids=_part(resolution.name_ref_ids, references.name_refs),
        uri_ref_ids=_part(resolution.uri_ref_ids, references.uri_refs),
    )


def _part(found: Mapping[K, V], wanted: Iterable[K]) -> dict[K, V]:
    """The entries of ``found`` under the ``wanted`` keys that it has."""
    return {key: found[key] for key in wanted if key in found}
