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
