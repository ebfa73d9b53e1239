"""What a task writes for its outlets, and the Airflow 3 wire format it is sent in.

``outlet_events[asset].extra["k"] = v``, ``outlet_events[alias].add(Asset(...), extra={...})``
and ``outlet_events[asset].add_partitions("2025-01-01", ...)``. Only accessors the task touched
produce events; the server gives every untouched declared asset an event with ``{}`` extra.

Everything is checked when it is serialized (:func:`serialize_outlet_events`), before any
request: an ``extra`` the server cannot store (``NaN``, a lone surrogate, nesting deeper than
``MAX_JSON_DEPTH``, ... see ``task_sdk.jsonvalues``) raises ``ValueError`` naming the event and
the key, and the task fails instead of sending it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from task_sdk.definitions import (
    Asset,
    AssetAlias,
    AssetAliasUniqueKey,
    AssetNameRef,
    AssetUniqueKey,
    AssetUriRef,
    ByNameOrUri,
    Outlet,
    asset_profile,
)
from task_sdk.jsonvalues import check_json_value, string_problem

#: Same width as the ``partition_key`` column.
PARTITION_KEY_MAX_LENGTH = 250

#: A resolved reference: the referenced asset's key and extra.
ResolvedRef = tuple[AssetUniqueKey, dict[str, Any]]
#: Resolves an asset reference to the referenced asset's key and extra (asks the server).
RefResolver = Callable[[AssetNameRef | AssetUriRef], ResolvedRef]


def describe_key(key: AssetUniqueKey | AssetAliasUniqueKey) -> str:
    """How messages name an asset or alias: ``Asset(name='x', uri='s3://x')``."""
    if isinstance(key, AssetAliasUniqueKey):
        return f"AssetAlias(name={key.name!r})"
    return f"Asset(name={key.name!r}, uri={key.uri!r})"


@dataclass(frozen=True)
class AssetAliasEvent:
    """An event emitted through an alias for the asset ``dest_asset_key``."""

    source_alias_name: str
    dest_asset_key: AssetUniqueKey
    dest_asset_extra: dict[str, Any]
    extra: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {
            "source_alias_name": self.source_alias_name,
            "dest_asset_key": self.dest_asset_key.as_dict(),
            "dest_asset_extra": self.dest_asset_extra,
            "extra": self.extra,
        }


@dataclass
class OutletEventAccessor:
    """What the task wrote for one asset or alias."""

    key: AssetUniqueKey | AssetAliasUniqueKey
    resolver: RefResolver | None = field(default=None, repr=False)
    extra: dict[str, Any] = field(default_factory=dict)
    asset_alias_events: list[AssetAliasEvent] = field(default_factory=list)
    # a dict keeps the order the task added the keys in, and drops duplicates
    partition_keys: dict[str, None] = field(default_factory=dict)

    def add_partitions(self, *keys: str | Iterable[str]) -> None:
        """Emit one event per partition key: ``add_partitions("a", "b")`` or ``(["a", "b"])``."""
        if isinstance(self.key, AssetAliasUniqueKey):
            raise TypeError("add_partitions() is not supported on asset alias outlet events")
        flat: list[str] = []
        for item in keys:
            flat.extend([item] if isinstance(item, str) else item)
        for key in flat:
            if not isinstance(key, str) or not key.strip():
                raise ValueError(f"partition_key must not be empty or whitespace-only: {key!r}")
            if len(key) > PARTITION_KEY_MAX_LENGTH:
                raise ValueError(
                    f"partition_key must be at most {PARTITION_KEY_MAX_LENGTH} characters"
                )
            if (problem := string_problem(key)) is not None:
                raise ValueError(f"partition_key {key!r} {problem}")
        for key in flat:
            self.partition_keys[key] = None

    def add(
        self, asset: Asset | AssetNameRef | AssetUriRef, extra: dict[str, Any] | None = None
    ) -> None:
        """Emit an event through this alias for ``asset`` (created on the server if missing)."""
        if not isinstance(self.key, AssetAliasUniqueKey):
            raise TypeError("add() is only supported on asset alias outlet events")
        if isinstance(asset, Asset):
            dest_key, dest_extra = asset.key, asset.extra
        elif isinstance(asset, AssetNameRef | AssetUriRef):
            if self.resolver is None:
                raise RuntimeError("asset references can only be resolved inside a running task")
            dest_key, dest_extra = self.resolver(asset)
        else:
            raise TypeError(f"expected an Asset or an asset reference, not {type(asset)}")
        self.asset_alias_events.append(
            AssetAliasEvent(
                source_alias_name=self.key.name,
                dest_asset_key=dest_key,
                dest_asset_extra=dict(dest_extra),
                extra=dict(extra or {}),
            )
        )


@dataclass(frozen=True)
class Metadata:
    """Yielded by a task: ``yield Metadata(asset, {"k": "v"}, alias=alias)`` sets the asset's
    event extra (and, with ``alias``, also emits the event through that alias)."""

    asset: Asset
    extra: dict[str, Any]
    alias: AssetAlias | None = None


class OutletEventAccessors(ByNameOrUri["OutletEventAccessor"]):
    """``outlet_events``: a lazy mapping from an asset, reference or alias to its accessor.

    References are resolved to the asset's key through ``resolver`` (the server), so writing
    through ``Asset.ref(name=...)`` and through the asset itself reach the same accessor.
    """

    def __init__(self, resolver: RefResolver | None = None) -> None:
        self._resolver = resolver
        self._ref_cache: dict[AssetNameRef | AssetUriRef, ResolvedRef] = {}
        self._accessors: dict[AssetUniqueKey | AssetAliasUniqueKey, OutletEventAccessor] = {}

    def _resolve(self, ref: AssetNameRef | AssetUriRef) -> ResolvedRef:
        if ref not in self._ref_cache:
            if self._resolver is None:
                raise RuntimeError("asset references can only be resolved inside a running task")
            self._ref_cache[ref] = self._resolver(ref)
        return self._ref_cache[ref]

    def __getitem__(self, key: Outlet) -> OutletEventAccessor:
        hashable: AssetUniqueKey | AssetAliasUniqueKey
        if isinstance(key, Asset | AssetAlias):
            hashable = key.key
        elif isinstance(key, AssetNameRef | AssetUriRef):
            hashable = self._resolve(key)[0]
        else:
            raise TypeError(f"key must be an Asset, an asset reference or an alias, not {key!r}")
        if hashable not in self._accessors:
            self._accessors[hashable] = OutletEventAccessor(key=hashable, resolver=self._resolve)
        return self._accessors[hashable]

    def __iter__(self) -> Iterator[AssetUniqueKey | AssetAliasUniqueKey]:
        return iter(self._accessors)

    def __len__(self) -> int:
        return len(self._accessors)

    def accessors(self) -> list[OutletEventAccessor]:
        return list(self._accessors.values())

    def record_metadata(self, metadata: Metadata) -> None:
        self[metadata.asset].extra.update(metadata.extra)
        if metadata.alias is not None:
            self[metadata.alias].add(metadata.asset, extra=metadata.extra)


def build_task_outlets(outlets: Iterable[Outlet]) -> list[dict[str, str | None]]:
    """``task_outlets``: one profile per declared outlet, in declaration order."""
    return [asset_profile(outlet) for outlet in outlets]


def _check_extra(extra: object, where: str) -> None:
    if not isinstance(extra, dict):
        raise ValueError(f"{where} must be a dict, not {type(extra).__name__}")
    check_json_value(extra, where=where)


def serialize_outlet_events(events: OutletEventAccessors) -> list[dict[str, Any]]:
    """``outlet_events``: everything the task wrote, in Airflow 3's wire format.

    Raises ``ValueError`` naming the event and the key when an ``extra`` cannot be stored (see
    the module docstring). The server filters out events for assets the task did not declare.
    """
    result: list[dict[str, Any]] = []
    for accessor in events.accessors():
        where = f"outlet_events[{describe_key(accessor.key)}]"
        for event in accessor.asset_alias_events:
            added = f"{where}.add({describe_key(event.dest_asset_key)})"
            _check_extra(event.extra, f"{added}.extra")
            _check_extra(event.dest_asset_extra, f"{added}.dest_asset_extra")
        if isinstance(accessor.key, AssetUniqueKey):
            _check_extra(accessor.extra, f"{where}.extra")
            base = {"dest_asset_key": accessor.key.as_dict(), "extra": accessor.extra}
            if accessor.partition_keys:
                result.extend({**base, "partition_key": pk} for pk in accessor.partition_keys)
            else:
                result.append(base)
        result.extend(event.as_dict() for event in accessor.asset_alias_events)
    return result
