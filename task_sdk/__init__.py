"""Runner side of the asset registry: a small task SDK speaking Airflow 3's execution API.

Importable without Django. See ``docs/readme-parts/worker.md``.
"""

from task_sdk.definitions import (
    Asset,
    AssetAlias,
    AssetNameRef,
    AssetUniqueKey,
    AssetUriRef,
    normalize_uri,
)

__all__ = [
    "Asset",
    "AssetAlias",
    "AssetNameRef",
    "AssetUniqueKey",
    "AssetUriRef",
    "normalize_uri",
]
__version__ = "0.1.0"
