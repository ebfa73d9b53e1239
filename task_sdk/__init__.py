"""Runner side of the asset registry: a small task SDK speaking Airflow 3's execution API.

Importable without Django. See the README, "Running tasks on workers: `task_sdk`".
"""

from task_sdk.decorators import Task, task
from task_sdk.definitions import (
    Asset,
    AssetAlias,
    AssetNameRef,
    AssetUniqueKey,
    AssetUriRef,
    normalize_uri,
)
from task_sdk.outlets import Metadata, OutletEventAccessors

__all__ = [
    "Asset",
    "AssetAlias",
    "AssetNameRef",
    "AssetUniqueKey",
    "AssetUriRef",
    "Metadata",
    "OutletEventAccessors",
    "Task",
    "normalize_uri",
    "task",
]
__version__ = "0.1.0"
