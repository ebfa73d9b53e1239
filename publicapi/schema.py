"""``/api/v2/openapi.json``: Airflow 3.3.2's own OpenAPI document, cut down to the routes and
query parameters served here (``SERVED``), with the registry's few additions (``EXTRA``).

The cut is made from the document ``apache-airflow-core`` ships (``openapi_build``) and kept
in ``publicapi/openapi.json`` so that the app does not need Airflow installed;
``tests/publicapi/test_openapi.py`` rebuilds it and fails when the two differ.
"""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path
from typing import Any

from django.http import HttpRequest, JsonResponse

SCHEMA_FILE = Path(__file__).with_name("openapi.json")

_DATES = [
    f"{f}_{op}"
    for f in ("run_after", "logical_date", "start_date", "end_date")
    for op in ("gte", "gt", "lte", "lt")
]
_PAGE = ["limit", "offset"]
_OPS = ("gte", "gt", "lte", "lt")
_XCOM_SEARCH = ("xcom_key", "dag_display_name", "run_id", "task_id")

LOG_ROUTE = "/api/v2/dags/{dag_id}/dagRuns/{dag_run_id}/taskInstances/{task_id}/logs/{try_number}"

#: path → method → the query parameters served (path parameters are always kept)
SERVED: dict[str, dict[str, list[str]]] = {
    "/api/v2/version": {"get": []},
    "/api/v2/monitor/health": {"get": []},
    "/api/v2/assets": {
        "get": [
            *_PAGE,
            "name_pattern",
            "name_prefix_pattern",
            "uri_pattern",
            "uri_prefix_pattern",
            "dag_ids",
            "only_active",
            "order_by",
        ],
    },
    "/api/v2/assets/{asset_id}": {"get": []},
    "/api/v2/assets/{asset_id}/materialize": {"post": []},
    "/api/v2/assets/aliases": {"get": [*_PAGE, "name_pattern", "name_prefix_pattern", "order_by"]},
    "/api/v2/assets/aliases/{asset_alias_id}": {"get": []},
    "/api/v2/assets/events": {
        "get": [
            *_PAGE,
            "order_by",
            "asset_id",
            "source_dag_id",
            "source_task_id",
            "source_run_id",
            "source_map_index",
            "name_pattern",
            "name_prefix_pattern",
            "timestamp_gte",
            "timestamp_gt",
            "timestamp_lte",
            "timestamp_lt",
        ],
        "post": [],
    },
    "/api/v2/assets/{asset_id}/queuedEvents": {"get": ["before"], "delete": ["before"]},
    "/api/v2/dags/{dag_id}/assets/queuedEvents": {"get": ["before"], "delete": ["before"]},
    "/api/v2/dags/{dag_id}/assets/{asset_id}/queuedEvents": {
        "get": ["before"],
        "delete": ["before"],
    },
    "/api/v2/dags": {
        "get": [
            *_PAGE,
            "dag_id_pattern",
            "dag_id_prefix_pattern",
            "dag_display_name_pattern",
            "dag_display_name_prefix_pattern",
            "exclude_stale",
            "paused",
            "has_asset_schedule",
            "order_by",
        ],
        "patch": [
            "update_mask",
            *_PAGE,
            "dag_id_pattern",
            "dag_id_prefix_pattern",
            "exclude_stale",
            "paused",
        ],
    },
    "/api/v2/dags/{dag_id}": {"get": [], "patch": ["update_mask"]},
    "/api/v2/dags/{dag_id}/details": {"get": []},
    "/api/v2/dags/{dag_id}/tasks": {"get": ["order_by"]},
    "/api/v2/dags/{dag_id}/tasks/{task_id}": {"get": []},
    "/api/v2/dagSources/{dag_id}": {"get": ["version_number", "accept"]},
    "/api/v2/dagStats": {"get": ["dag_ids"]},
    "/api/v2/dagTags": {"get": [*_PAGE, "order_by", "tag_name_pattern", "tag_name_prefix_pattern"]},
    "/api/v2/importErrors": {
        "get": [
            *_PAGE,
            "order_by",
            "filename_pattern",
            "filename_prefix_pattern",
            "filename",
            "bundle_name",
        ]
    },
    "/api/v2/importErrors/{import_error_id}": {"get": []},
    "/api/v2/dags/{dag_id}/dagRuns": {
        "get": [*_PAGE, *_DATES, "run_type", "state", "order_by", "run_id_pattern"],
        "post": [],
    },
    "/api/v2/dags/{dag_id}/dagRuns/{dag_run_id}": {"get": [], "patch": ["update_mask"]},
    "/api/v2/dags/{dag_id}/dagRuns/{dag_run_id}/clear": {"post": []},
    "/api/v2/dags/{dag_id}/dagRuns/{dag_run_id}/taskInstances": {"get": _PAGE},
    "/api/v2/dags/{dag_id}/dagRuns/{dag_run_id}/taskInstances/{task_id}": {
        "get": [],
        "patch": ["map_index", "update_mask"],
    },
    "/api/v2/dags/{dag_id}/dagRuns/{dag_run_id}/taskInstances/{task_id}/listMapped": {
        "get": [*_PAGE, "state"]
    },
    "/api/v2/dags/{dag_id}/dagRuns/{dag_run_id}/taskInstances/{task_id}/{map_index}": {
        "get": [],
        "patch": ["update_mask"],
    },
    "/api/v2/dags/{dag_id}/dagRuns/{dag_run_id}/taskInstances/{task_id}/xcomEntries": {
        "get": [
            *_PAGE,
            "xcom_key",
            "map_index",
            *(f"{f}_{kind}" for f in _XCOM_SEARCH for kind in ("pattern", "prefix_pattern")),
            "map_index_filter",
            *(f"{f}_{op}" for f in ("logical_date", "run_after") for op in _OPS),
            "order_by",
        ]
    },
    "/api/v2/dags/{dag_id}/dagRuns/{dag_run_id}/taskInstances/{task_id}/dependencies": {"get": []},
    "/api/v2/dags/{dag_id}/dagRuns/{dag_run_id}/taskInstances/{task_id}/xcomEntries/{xcom_key}": {
        "get": ["map_index", "deserialize", "stringify"]
    },
    LOG_ROUTE: {"get": ["full_content", "map_index", "token", "accept"]},
    "/api/v2/variables": {
        "get": [*_PAGE, "order_by", "variable_key_pattern", "variable_key_prefix_pattern"],
        "post": [],
    },
    "/api/v2/variables/{variable_key}": {"get": [], "patch": ["update_mask"], "delete": []},
    "/api/v2/eventLogs": {
        "get": [
            *_PAGE,
            "order_by",
            "dag_id",
            "task_id",
            "run_id",
            "map_index",
            "try_number",
            "owner",
            "event",
            "excluded_events",
            "included_events",
            "before",
            "after",
            *(
                f"{field}_{kind}"
                for field in ("dag_id", "task_id", "run_id", "owner", "event")
                for kind in ("pattern", "prefix_pattern")
            ),
        ],
    },
    "/api/v2/eventLogs/{event_log_id}": {"get": []},
    "/api/v2/pools": {
        "get": [*_PAGE, "order_by", "pool_name_pattern", "pool_name_prefix_pattern"],
        "post": [],
        "patch": [],
    },
    "/api/v2/pools/{pool_name}": {"get": [], "patch": ["update_mask"], "delete": []},
    "/api/v2/connections": {
        "get": [*_PAGE, "order_by", "connection_id_pattern", "connection_id_prefix_pattern"],
        "post": [],
    },
    "/api/v2/connections/{connection_id}": {
        "get": [],
        "patch": ["update_mask"],
        "delete": [],
    },
}

#: Responses the registry gives beyond Airflow's document: (path, method) → status → why.
EXTRA_RESPONSES: dict[tuple[str, str], dict[str, str]] = {
    # a route that answers 404 when nothing is queued (Airflow's does too, undeclared)
    # and 400 for a ``before`` that is no date-time (Airflow's, undeclared)
    ("/api/v2/assets/{asset_id}/queuedEvents", "get"): {"404": "Not Found", "400": "Bad Request"},
    ("/api/v2/assets/{asset_id}/queuedEvents", "delete"): {"400": "Bad Request"},
    ("/api/v2/dags/{dag_id}/assets/queuedEvents", "get"): {
        "404": "Not Found",
        "400": "Bad Request",
    },
    ("/api/v2/dags/{dag_id}/assets/{asset_id}/queuedEvents", "get"): {
        "404": "Not Found",
        "400": "Bad Request",
    },
    # an asset given by name/uri that matches several inactive assets; an empty body
    ("/api/v2/assets/events", "post"): {"400": "Bad Request"},
    # clearing refuses running task instances instead of restarting them; bad order_by/limit
    ("/api/v2/dags/{dag_id}/dagRuns/{dag_run_id}/clear", "post"): {"409": "Conflict"},
    ("/api/v2/assets", "get"): {"400": "Bad Request"},
    ("/api/v2/assets/aliases", "get"): {"400": "Bad Request"},
    ("/api/v2/assets/events", "get"): {"400": "Bad Request"},
    ("/api/v2/dags", "get"): {"400": "Bad Request"},
    ("/api/v2/variables", "get"): {"400": "Bad Request"},
    ("/api/v2/connections", "get"): {"400": "Bad Request"},
    ("/api/v2/pools", "get"): {"400": "Bad Request"},
    ("/api/v2/eventLogs", "get"): {"400": "Bad Request"},
    # a name, slots or description the service refuses (a NUL, default_pool's description)
    ("/api/v2/pools", "post"): {"400": "Bad Request"},
    # a value the database cannot hold (longer than its column, a NUL in a JSON string)
    ("/api/v2/variables", "post"): {"400": "Bad Request"},
    ("/api/v2/connections", "post"): {"400": "Bad Request"},
    ("/api/v2/importErrors", "get"): {"400": "Bad Request"},
    ("/api/v2/dagTags", "get"): {"400": "Bad Request"},
    # a continuation token the server did not sign (Airflow's, undeclared); an Accept header
    # that is none of the log's media types (Airflow's 406, undeclared)
    (LOG_ROUTE, "get"): {"400": "Bad Request", "406": "Not Acceptable"},
    # an Accept header that is neither JSON nor text (Airflow's 406, undeclared)
    ("/api/v2/dagSources/{dag_id}", "get"): {"406": "Not Acceptable"},
}

#: The asset-event body by name and/or uri (apache/airflow#53615), besides Airflow's by id.
BY_KEY_BODY = {
    "properties": {
        "name": {"type": "string", "title": "Name"},
        "uri": {"type": "string", "title": "Uri"},
        "partition_key": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "extra": {"additionalProperties": True, "type": "object", "title": "Extra"},
    },
    "additionalProperties": False,
    "type": "object",
    "minProperties": 1,
    "title": "CreateAssetEventsByKeyBody",
    "description": "An asset event for the asset with this name and/or uri (registry addition).",
}


def _refs(node: Any) -> set[str]:
    if isinstance(node, dict):
        found = {node["$ref"].rsplit("/", 1)[-1]} if "$ref" in node else set()
        for value in node.values():
            found |= _refs(value)
        return found
    if isinstance(node, list):
        return set().union(*(_refs(v) for v in node)) if node else set()
    return set()


def _clear_collection(schema: dict[str, Any]) -> dict[str, Any]:
    """Airflow's dry-run clear items are ``oneOf`` a task instance or ``NewTaskResponse`` (two
    required fields, no others forbidden): every task instance matches both, so no response
    could be valid. ``anyOf`` says what Airflow means."""
    fixed = copy.deepcopy(schema)
    items = fixed["properties"]["task_instances"]["items"]
    items["anyOf"] = items.pop("oneOf")
    return fixed


#: Bodies whose ``team_name`` must be null: the registry has no teams, and Airflow too refuses
#: one (422) with ``[core] multi_team`` off, which its document cannot say.
NO_TEAM_BODIES = ("VariableBody", "ConnectionBody", "PoolBody", "PoolPatchBody")


def _no_team(schema: dict[str, Any]) -> dict[str, Any]:
    fixed = copy.deepcopy(schema)
    fixed["properties"]["team_name"] = {
        "type": "null",
        "title": "Team Name",
        "description": "Always null: the registry has no teams (multi_team off).",
    }
    return fixed


def openapi_build(airflow: dict[str, Any]) -> dict[str, Any]:
    """Airflow's document restricted to ``SERVED``, with every schema the kept operations
    reference (transitively), and the registry's additions."""
    paths: dict[str, Any] = {}
    for route, methods in SERVED.items():
        for method, params in methods.items():
            operation = copy.deepcopy(airflow["paths"][route][method])
            operation["parameters"] = [
                p
                for p in operation.get("parameters", [])
                if p["in"] == "path" or p["name"] in params
            ]
            if not operation["parameters"]:
                del operation["parameters"]
            for code, description in EXTRA_RESPONSES.get((route, method), {}).items():
                operation["responses"].setdefault(
                    code,
                    {
                        "description": description,
                        "content": {
                            "application/json": {
                                "schema": {"$ref": "#/components/schemas/HTTPExceptionResponse"}
                            }
                        },
                    },
                )
            paths.setdefault(route, {})[method] = operation
    events_post = paths["/api/v2/assets/events"]["post"]
    events_post["requestBody"]["content"]["application/json"]["schema"] = {
        "anyOf": [
            {"$ref": "#/components/schemas/CreateAssetEventsBody"},
            {"$ref": "#/components/schemas/CreateAssetEventsByKeyBody"},
        ]
    }
    schemas = airflow["components"]["schemas"]
    wanted: set[str] = set()
    pending = _refs(paths) - {"CreateAssetEventsByKeyBody"}
    while pending:
        name = pending.pop()
        wanted.add(name)
        pending |= _refs(schemas[name]) - wanted
    kept = {name: schemas[name] for name in sorted(wanted)}
    kept["CreateAssetEventsByKeyBody"] = BY_KEY_BODY
    for name in NO_TEAM_BODIES:
        kept[name] = _no_team(kept[name])
    kept["ClearTaskInstanceCollectionResponse"] = _clear_collection(
        kept["ClearTaskInstanceCollectionResponse"]
    )
    return {
        "openapi": airflow["openapi"],
        "info": {
            **airflow["info"],
            "title": "Asset registry: Airflow public API",
            "description": "Apache Airflow 3.3.2's public REST API for what the asset registry "
            "keeps: assets, asset events, DAGs, DAG runs, task instances, XComs, variables, "
            "connections and pools.",
        },
        "paths": paths,
        "components": {
            "schemas": kept,
            "securitySchemes": airflow["components"]["securitySchemes"],
        },
    }


@functools.cache
def openapi_document() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(SCHEMA_FILE.read_text())
    return document


def openapi_view(request: HttpRequest) -> JsonResponse:
    return JsonResponse(openapi_document())
