"""What a consumer task reads: ``inlet_events`` and ``triggering_asset_events``.

``inlet_events[asset]`` (also ``Asset.ref(name=...)``, ``Asset.ref(uri=...)``, an
``AssetAlias`` or an index into the declared inlets) is the asset's event history, fetched from
the server (``GET /execution/asset-events/by-asset`` / ``by-asset-alias``) only when it is
read, oldest first. Only declared inlets can be read: anything else raises ``KeyError``, as in
Airflow. ``len()``, iteration and slices fetch the whole history once; a single index fetches
only what it needs (``events[-1]`` asks for the newest event alone: ``ascending=false&limit=1``).
``.after(when)``, ``.before(when)`` (inclusive), ``.ascending(False)`` and ``.limit(n)`` narrow
the query, as in Airflow.

``triggering_asset_events`` are the events that triggered this (asset-triggered) DAG run, from
the run context's ``dag_run.consumed_asset_events``: a mapping from an asset (an ``Asset``, its
``AssetUniqueKey``, or a reference resolved through the server) or an alias the events were
emitted through, to that asset's events, oldest first.

Both give :class:`AssetEvent` objects.
"""

from __future__ import annotations

import dataclasses
import operator
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Self, overload

from task_sdk.definitions import (
    Asset,
    AssetAlias,
    AssetAliasUniqueKey,
    AssetNameRef,
    AssetUniqueKey,
    AssetUriRef,
    ByNameOrUri,
    Outlet,
    normalize_uri,
)
from task_sdk.outlets import RefResolver

AssetKey = AssetUniqueKey | AssetAliasUniqueKey


def parse_timestamp(value: str | datetime) -> datetime:
    """An aware datetime from the server's ISO 8601 text (a naive value is taken as UTC)."""
    when = value if isinstance(value, datetime) else datetime.fromisoformat(value)
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


@dataclass(frozen=True)
class EventAsset:
    """The asset an event was recorded for, as the server describes it."""

    name: str
    uri: str
    extra: dict[str, Any] = field(default_factory=dict)
    group: str | None = None  # given by /asset-events, not by the run context

    @property
    def key(self) -> AssetUniqueKey:
        return AssetUniqueKey(name=self.name, uri=self.uri)


@dataclass(frozen=True)
class AssetEvent:
    """One recorded asset event, read by a consumer.

    ``id`` and ``created_dagruns`` come with ``inlet_events`` (the ``/asset-events`` routes);
    ``source_aliases`` with ``triggering_asset_events`` (the run context). What the source does
    not give is None. ``asset`` is None for an event whose asset was deleted.
    """

    asset: EventAsset | None
    extra: dict[str, Any]
    timestamp: datetime
    source_dag_id: str | None = None
    source_run_id: str | None = None
    source_task_id: str | None = None
    source_map_index: int | None = None
    partition_key: str | None = None
    id: int | None = None
    source_aliases: tuple[AssetAliasUniqueKey, ...] | None = None
    created_dagruns: tuple[dict[str, Any], ...] | None = None

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> AssetEvent:
        """From an ``/asset-events`` item or a ``consumed_asset_events`` entry."""
        asset = data.get("asset")
        aliases = data.get("source_aliases")
        dagruns = data.get("created_dagruns")
        return cls(
            asset=(
                EventAsset(
                    name=asset["name"],
                    uri=asset["uri"],
                    extra=asset.get("extra") or {},
                    group=asset.get("group"),
                )
                if asset
                else None
            ),
            extra=data.get("extra") or {},
            timestamp=parse_timestamp(data["timestamp"]),
            source_dag_id=data.get("source_dag_id"),
            source_run_id=data.get("source_run_id"),
            source_task_id=data.get("source_task_id"),
            source_map_index=data.get("source_map_index"),
            partition_key=data.get("partition_key"),
            id=data.get("id"),
            source_aliases=(
                tuple(AssetAliasUniqueKey(name=a["name"]) for a in aliases)
                if aliases is not None
                else None
            ),
            created_dagruns=tuple(dagruns) if dagruns is not None else None,
        )


@dataclass(frozen=True)
class AssetEventsQuery:
    """One read of ``/asset-events``: an asset by name and/or uri, or an alias."""

    name: str | None = None
    uri: str | None = None
    alias_name: str | None = None
    after: datetime | None = None
    before: datetime | None = None
    ascending: bool = True
    limit: int | None = None


#: Runs a query against the server and returns its ``asset_events`` items.
EventsFetcher = Callable[[AssetEventsQuery], list[dict[str, Any]]]


def _normalized(uri: str) -> str:
    try:
        return normalize_uri(uri)
    except ValueError:
        return uri


def _aware(value: datetime | str, what: str) -> datetime:
    try:
        when = value if isinstance(value, datetime) else datetime.fromisoformat(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a datetime or ISO 8601 text, got {value!r}") from None
    if when.tzinfo is None:
        raise ValueError(f"{what} must be timezone-aware, got {value!r}")
    return when


class InletEventsAccessor(Sequence[AssetEvent]):
    """The events of one inlet, fetched lazily (see the module docstring)."""

    def __init__(
        self,
        fetch: EventsFetcher,
        *,
        name: str | None = None,
        uri: str | None = None,
        alias_name: str | None = None,
    ) -> None:
        if name is None and uri is None and alias_name is None:
            raise ValueError("an inlet accessor needs an asset name, uri or alias name")
        self._fetch = fetch
        self._query = AssetEventsQuery(name=name, uri=uri, alias_name=alias_name)
        self._reset()

    def _reset(self) -> None:
        self._all: list[AssetEvent] | None = None
        # the first events in each direction fetched so far, keyed by "ascending"
        self._heads: dict[bool, list[AssetEvent]] = {}

    def _narrow(self, **changes: Any) -> Self:
        self._query = dataclasses.replace(self._query, **changes)
        self._reset()
        return self

    def after(self, when: datetime | str) -> Self:
        """Only events at or after ``when`` (timezone-aware)."""
        return self._narrow(after=_aware(when, "after"))

    def before(self, when: datetime | str) -> Self:
        """Only events at or before ``when`` (timezone-aware)."""
        return self._narrow(before=_aware(when, "before"))

    def ascending(self, ascending: bool = True) -> Self:
        """Oldest first (the default) or, with ``False``, newest first."""
        return self._narrow(ascending=bool(ascending))

    def limit(self, limit: int) -> Self:
        """At most ``limit`` events (the first ones in the chosen order)."""
        if operator.index(limit) < 1:
            raise ValueError(f"limit must be at least 1, got {limit!r}")
        return self._narrow(limit=limit)

    def _request(self, *, ascending: bool, limit: int | None) -> list[AssetEvent]:
        query = dataclasses.replace(self._query, ascending=ascending, limit=limit)
        return [AssetEvent.from_wire(item) for item in self._fetch(query)]

    def _events(self) -> list[AssetEvent]:
        """Every event of the query (one request, then cached)."""
        if self._all is None:
            self._all = self._request(ascending=self._query.ascending, limit=self._query.limit)
        return self._all

    def _head(self, count: int, *, reverse: bool = False) -> list[AssetEvent]:
        """At least the first ``count`` events (fewer if there are fewer), newest-end first
        when ``reverse``. Only used without a ``limit`` when ``reverse``.
        """
        ascending = self._query.ascending != reverse
        head = self._heads.get(ascending)
        if head is None or len(head) < count:
            head = self._heads[ascending] = self._request(ascending=ascending, limit=count)
            if len(head) < count:  # that is all of them
                self._all = list(reversed(head)) if reverse else head
        return head

    def __len__(self) -> int:
        return len(self._events())

    def __iter__(self) -> Iterator[AssetEvent]:
        return iter(self._events())

    def __bool__(self) -> bool:
        return bool(self._all) if self._all is not None else bool(self._head(1))

    @overload
    def __getitem__(self, index: int) -> AssetEvent: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[AssetEvent]: ...

    def __getitem__(self, index: int | slice) -> AssetEvent | Sequence[AssetEvent]:
        if isinstance(index, slice):
            return self._events()[index]
        position = operator.index(index)
        if self._all is not None:
            return self._all[position]
        limit = self._query.limit
        if position >= 0 and (limit is None or position < limit):
            head, wanted = self._head(position + 1), position
        elif position < 0 and limit is None:
            # the -n-th of the oldest-first list is the n-th of the newest-first one
            head, wanted = self._head(-position, reverse=True), -position - 1
        elif position >= 0:
            raise IndexError(f"inlet event index {position} is beyond limit({limit})")
        else:
            return self._events()[position]  # the end of "the first N" needs all N
        if wanted >= len(head):
            raise IndexError(f"inlet event index {position} out of range")
        return head[wanted]

    def __repr__(self) -> str:
        fields = {k: v for k, v in dataclasses.asdict(self._query).items() if v is not None}
        return f"<InletEventsAccessor {fields}>"


class InletEventsAccessors(
    ByNameOrUri[InletEventsAccessor], Mapping[int | Outlet, InletEventsAccessor]
):
    """``inlet_events``: the task's declared inlets → their events (see the module docstring).

    Iterating gives the declared inlets. A reference looks up the declared asset it names
    (``Asset.ref(name="x")`` finds a declared ``Asset("x", ...)``); finding a declared
    reference by the asset it points to resolves the reference through the server.
    """

    def __init__(
        self,
        inlets: Sequence[Outlet],
        fetch: EventsFetcher,
        resolver: RefResolver | None = None,
    ) -> None:
        self._inlets = list(inlets)
        self._fetch = fetch
        self._resolver = resolver
        self._keys = {i.key for i in self._inlets if isinstance(i, Asset)}
        self._aliases = {i.name for i in self._inlets if isinstance(i, AssetAlias)}
        self._refs = [i for i in self._inlets if isinstance(i, AssetNameRef | AssetUriRef)]
        self._resolved: set[AssetUniqueKey] | None = None

    def _resolved_refs(self) -> set[AssetUniqueKey]:
        if self._resolved is None:
            if self._refs and self._resolver is None:
                raise RuntimeError("asset references can only be resolved inside a running task")
            resolve = self._resolver
            self._resolved = {resolve(ref)[0] for ref in self._refs} if resolve else set()
        return self._resolved

    def _is_declared(
        self, matches: Callable[[AssetUniqueKey], bool], ref: AssetNameRef | AssetUriRef | None
    ) -> bool:
        """Whether a declared asset matches, or ``ref`` is declared itself, or a declared
        reference resolves (through the server, once) to a matching asset."""
        if any(map(matches, self._keys)) or (ref is not None and ref in self._refs):
            return True
        return bool(self._refs) and any(map(matches, self._resolved_refs()))

    def __getitem__(self, key: int | Outlet) -> InletEventsAccessor:
        inlet = self._inlets[key] if isinstance(key, int) else key
        if isinstance(inlet, Asset):
            declared = self._is_declared(lambda k: k == inlet.key, None)
            accessor = InletEventsAccessor(self._fetch, name=inlet.name, uri=inlet.uri)
        elif isinstance(inlet, AssetNameRef):
            declared = self._is_declared(lambda k: k.name == inlet.name, inlet)
            accessor = InletEventsAccessor(self._fetch, name=inlet.name)
        elif isinstance(inlet, AssetUriRef):
            uri = _normalized(inlet.uri)
            declared = self._is_declared(lambda k: k.uri == uri, inlet)
            accessor = InletEventsAccessor(self._fetch, uri=inlet.uri)
        elif isinstance(inlet, AssetAlias):
            declared = inlet.name in self._aliases
            accessor = InletEventsAccessor(self._fetch, alias_name=inlet.name)
        else:
            raise TypeError(
                f"inlet_events keys are an Asset, Asset.ref(...), an AssetAlias or an index, "
                f"not {type(key).__name__}"
            )
        if not declared:
            raise KeyError(f"{inlet!r} is not an inlet of this task (declare it in inlets=[...])")
        return accessor

    def __iter__(self) -> Iterator[Outlet]:
        return iter(self._inlets)

    def __len__(self) -> int:
        return len(self._inlets)


class TriggeringAssetEventsAccessor(
    ByNameOrUri[Sequence[AssetEvent]],
    Mapping[Outlet | AssetUniqueKey | AssetAliasUniqueKey, Sequence[AssetEvent]],
):
    """``triggering_asset_events``: asset or alias → the events that triggered this run.

    Keys (when iterating) are ``AssetUniqueKey`` (``.name``, ``.uri``) for every asset with an
    event and ``AssetAliasUniqueKey`` (``.name``) for every alias an event came through.
    """

    def __init__(
        self,
        events: Iterable[AssetEvent],
        resolver: RefResolver | None = None,
    ) -> None:
        grouped: dict[AssetKey, list[AssetEvent]] = defaultdict(list)
        for event in events:
            if event.asset is not None:
                grouped[event.asset.key].append(event)
            for alias in event.source_aliases or ():
                grouped[alias].append(event)
        self._events = {key: tuple(group) for key, group in grouped.items()}
        self._resolver = resolver

    @classmethod
    def from_run_context(
        cls, ti_context: Mapping[str, Any], resolver: RefResolver | None = None
    ) -> TriggeringAssetEventsAccessor:
        dag_run = ti_context.get("dag_run") or {}
        consumed = dag_run.get("consumed_asset_events") or []
        return cls((AssetEvent.from_wire(item) for item in consumed), resolver)

    def __getitem__(
        self, key: Outlet | AssetUniqueKey | AssetAliasUniqueKey
    ) -> Sequence[AssetEvent]:
        hashable: AssetKey
        if isinstance(key, AssetUniqueKey | AssetAliasUniqueKey):
            hashable = key
        elif isinstance(key, Asset | AssetAlias):
            hashable = key.key
        elif isinstance(key, AssetNameRef | AssetUriRef):
            if self._resolver is None:
                raise RuntimeError("asset references can only be resolved inside a running task")
            hashable = self._resolver(key)[0]
        else:
            raise TypeError(
                "triggering_asset_events keys are an Asset, its key, Asset.ref(...) or an "
                f"AssetAlias, not {type(key).__name__}"
            )
        return self._events[hashable]

    def __iter__(self) -> Iterator[AssetKey]:
        return iter(self._events)

    def __len__(self) -> int:
        return len(self._events)

    def __repr__(self) -> str:
        counts = {key: len(events) for key, events in self._events.items()}
        return f"<TriggeringAssetEventsAccessor {counts}>"
