"""Typed, wire-format-independent input of asset registration (docs/concepts.md).

The execution API's serializers turn both accepted wire formats (Airflow 3 and the seed
format) into these values; ``assets_app.services.assets.registration`` consumes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from task_sdk.definitions import AssetAliasUniqueKey, AssetNameRef, AssetUniqueKey, AssetUriRef


class OutletType(StrEnum):
    ASSET = "Asset"
    NAME_REF = "AssetNameRef"
    URI_REF = "AssetUriRef"
    ALIAS = "AssetAlias"


@dataclass(frozen=True)
class OutletProfile:
    """One declared outlet of the task: ``Asset`` has name and uri, refs one of them,
    ``AssetAlias`` a name."""

    type: OutletType
    name: str | None = None
    uri: str | None = None

    @property
    def leaf(self) -> AssetUniqueKey | AssetAliasUniqueKey | AssetNameRef | AssetUriRef | None:
        """What the outlet declares, as a condition's leaf; ``None`` if it lacks the name or
        uri its type needs, or a ref's would name no asset (whitespace only)."""
        if self.type == OutletType.ASSET and self.name and self.uri:
            return AssetUniqueKey(name=self.name, uri=self.uri)
        if self.type == OutletType.ALIAS and self.name:
            return AssetAliasUniqueKey(name=self.name)
        try:
            if self.type == OutletType.NAME_REF and self.name:
                return AssetNameRef(self.name)
            if self.type == OutletType.URI_REF and self.uri:
                return AssetUriRef(self.uri)
        except ValueError:
            return None
        return None


@dataclass(frozen=True)
class AssetOutletEvent:
    """What the task wrote for a declared asset (``outlet_events[asset]``)."""

    key: AssetUniqueKey
    extra: dict[str, Any] = field(default_factory=dict)
    partition_key: str | None = None


@dataclass(frozen=True)
class AliasOutletEvent:
    """An event the task emitted through an alias (``outlet_events[alias].add(...)``)."""

    source_alias_name: str
    dest_asset_key: AssetUniqueKey
    extra: dict[str, Any] = field(default_factory=dict)
    dest_asset_extra: dict[str, Any] = field(default_factory=dict)
    partition_key: str | None = None


OutletEvent = AssetOutletEvent | AliasOutletEvent
