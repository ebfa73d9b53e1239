"""The two OpenAPI schemas: the execution API's (project-wide default) and the operator API's.

drf-spectacular builds one schema from every DRF route; these preprocessing hooks split it by
path: the default schema (``SPECTACULAR_SETTINGS``, served at ``/execution/openapi.json``)
leaves the operator API out, and the operator API's view keeps only its own paths.

The operator API's schema also declares the errors every operation can answer (see
:func:`declare_error_responses`), so that a client — or a schema-driven fuzzer — knows a 400,
401 or 403 for what it is.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

PREFIX = "/api/v1/"

#: The project's postprocessing hooks (the enum hook, required request bodies), then ours.
_PROJECT_POSTPROCESSING_HOOKS: list[str] = [
    str(hook)
    for hook in settings.SPECTACULAR_SETTINGS.get(  # type: ignore[attr-defined]
        "POSTPROCESSING_HOOKS", ["drf_spectacular.hooks.postprocess_schema_enums"]
    )
]

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
    "POSTPROCESSING_HOOKS": [
        *_PROJECT_POSTPROCESSING_HOOKS,
        "operatorapi.schema.declare_error_responses",
    ],
}

Endpoint = tuple[str, str, str, Any]


def only_operator_api(endpoints: list[Endpoint], **kwargs: Any) -> list[Endpoint]:
    """Keep the routes under ``/api/v1/``."""
    return [endpoint for endpoint in endpoints if endpoint[0].startswith(PREFIX)]


def exclude_operator_api(endpoints: list[Endpoint], **kwargs: Any) -> list[Endpoint]:
    """Drop the routes under ``/api/v1/`` (from the project's default schema)."""
    return [endpoint for endpoint in endpoints if not endpoint[0].startswith(PREFIX)]


_JSON = "application/json"

#: ``{"detail": "…", "code": "…"}`` (:mod:`operatorapi.exceptions`).
ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["detail", "code"],
    "properties": {"detail": {"type": "string"}, "code": {"type": "string"}},
}
#: ``{"<field or parameter>": ["<message>", …], …}``; a nested field's errors nest.
VALIDATION_ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": {
        "oneOf": [{"type": "array", "items": {"type": "string"}}, {"type": "object"}]
    },
}

#: Status → (description, body) of the errors any operation may answer.
_ERRORS: dict[str, tuple[str, dict[str, Any]]] = {
    "400": (
        "Bad input: one key per bad field or query parameter, or a JSON parse error",
        {"anyOf": [{"$ref": "#/components/schemas/Error"}, VALIDATION_ERROR_SCHEMA]},
    ),
    "401": ("No or bad credentials", {"$ref": "#/components/schemas/Error"}),
    "403": ("A model permission is missing", {"$ref": "#/components/schemas/Error"}),
    "404": ("No such object", {"$ref": "#/components/schemas/Error"}),
}


def declare_error_responses(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """Every operation may answer 401 and 403; one taking query parameters or a body, 400;
    one with a path parameter, 404 (a response an operation declares itself is kept)."""
    result.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR_SCHEMA
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            parameters = {parameter["in"] for parameter in operation.get("parameters", [])}
            statuses = ["401", "403"]
            if "query" in parameters or "requestBody" in operation:
                statuses.append("400")
            if "path" in parameters:
                statuses.append("404")
            responses = operation.setdefault("responses", {})
            for status in sorted(statuses):
                description, body = _ERRORS[status]
                responses.setdefault(
                    status, {"description": description, "content": {_JSON: {"schema": body}}}
                )
    return result
