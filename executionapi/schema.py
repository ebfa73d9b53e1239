"""drf-spectacular hooks of the execution API's OpenAPI schema."""

from __future__ import annotations

from typing import Any

PREFIX = "/execution/"


def request_bodies_required(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """Every execution API operation that takes a body needs it (none is optional): an empty
    ``PATCH …/state`` is a 422, so the schema must not call the body optional."""
    for path, operations in result.get("paths", {}).items():
        if not path.startswith(PREFIX):
            continue
        for operation in operations.values():
            if isinstance(operation, dict) and "requestBody" in operation:
                operation["requestBody"]["required"] = True
    return result


#: Operations whose 200 is an object or ``null`` (Airflow's ``-> Model | None``).
NULLABLE_ANSWERS = frozenset({"get_previous_dagrun", "get_previous_task_instance"})


def nullable_answers(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """The 200 of each :data:`NULLABLE_ANSWERS` operation may be ``null``: OpenAPI 3.0 puts
    ``nullable`` beside an ``allOf`` of the component (beside a bare ``$ref`` it is ignored)."""
    for path, operations in result.get("paths", {}).items():
        if not path.startswith(PREFIX):
            continue
        for operation in operations.values():
            if not isinstance(operation, dict):
                continue
            if operation.get("operationId") not in NULLABLE_ANSWERS:
                continue
            content = operation["responses"]["200"]["content"]["application/json"]
            content["schema"] = {"allOf": [content["schema"]], "nullable": True}
    return result
