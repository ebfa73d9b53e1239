"""The two OpenAPI schemas: the execution API's (project-wide default) and the operator API's.

drf-spectacular builds one schema from every DRF route; these preprocessing hooks split it by
path: the default schema (``SPECTACULAR_SETTINGS``, served at ``/execution/openapi.json``)
leaves the operator API out, and the operator API's view keeps only its own paths.
"""

from __future__ import annotations

from typing import Any

PREFIX = "/api/v1/"

#: drf-spectacular settings of the operator API's schema view (on top of the project's).
OPERATOR_SCHEMA_SETTINGS = {
    "TITLE": "Asset registry operator API",
    "DESCRIPTION": (
        "For scripts and other services: assets, aliases, asset events (list, create by asset "
        "name or uri), DAGs (pause/unpause), DAG runs and the asset DAG-run queue. "
        "Authenticate as a Django user with `Authorization: Token <key>` (or the admin's "
        "session); every operation needs the matching model permission "
        "(`view_*` for reads). Lists are cursor-paginated: follow `next`."
    ),
    "VERSION": "1",
    "SCHEMA_PATH_PREFIX": PREFIX.rstrip("/"),
    "PREPROCESSING_HOOKS": ["operatorapi.schema.only_operator_api"],
}

Endpoint = tuple[str, str, str, Any]


def only_operator_api(endpoints: list[Endpoint], **kwargs: Any) -> list[Endpoint]:
    """Keep the routes under ``/api/v1/``."""
    return [endpoint for endpoint in endpoints if endpoint[0].startswith(PREFIX)]


def exclude_operator_api(endpoints: list[Endpoint], **kwargs: Any) -> list[Endpoint]:
    """Drop the routes under ``/api/v1/`` (from the project's default schema)."""
    return [endpoint for endpoint in endpoints if not endpoint[0].startswith(PREFIX)]
