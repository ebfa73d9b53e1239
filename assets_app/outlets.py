"""Typed, wire-format-independent input of asset registration (SPEC §3.1, §4).

The execution API's serializers turn both accepted wire formats (Airflow 3 and the seed
format) into these values; ``assets_app.services.registration`` consumes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from task_sdk.definitions import AssetUniqueKey


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
