"""Runner side of the asset registry: a small task SDK speaking Airflow 3's execution API.

Importable without Django. See docs/task-sdk.md.
"""

from task_sdk.decorators import Task, task
from task_sdk.definitions import (
    Asset,
    AssetAlias,
    AssetAliasUniqueKey,
    AssetNameRef,
    AssetUniqueKey,
    AssetUriRef,
    normalize_uri,
)
from task_sdk.inlets import (
    AssetEvent,
    EventAsset,
    InletEventsAccessor,
    InletEventsAccessors,
    TriggeringAssetEventsAccessor,
)
from task_sdk.jsonvalues import MAX_JSON_DEPTH
from task_sdk.outlets import Metadata, OutletEventAccessors

__all__ = [
    "MAX_JSON_DEPTH",
    "Asset",
    "AssetAlias",
    "AssetAliasUniqueKey",
    "AssetEvent",
    "AssetNameRef",
    "AssetUniqueKey",
    "AssetUriRef",
    "EventAsset",
    "InletEventsAccessor",
    "InletEventsAccessors",
    "Metadata",
    "OutletEventAccessors",
    "Task",
    "TriggeringAssetEventsAccessor",
    "normalize_uri",
    "task",
]
__version__ = "0.1.0"
