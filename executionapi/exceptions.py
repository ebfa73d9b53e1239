"""Errors of the execution API and the bodies of its error answers (docs/api-execution.md).

The status of a domain error, the headers, the rollback and the logging are the edge kit's
(:mod:`assets_app.edge.errors`); the bodies here are Airflow's execution API's:

- ``{"detail": {"reason": "<code>", "message": "<text>", ...}}`` for every error, with the
  domain error's extra context (``previous_state``, ``current_hostname`` …) merged in;
- 422 ``{"detail": [{"loc": [...], "msg": "...", "type": "..."}]}`` for validation errors,
  one entry per bad field;
- anything unexpected (a database failure included) is answered 500 as JSON, so that the
  real client retries it.

Responses are rendered by DRF's ``JSONRenderer``, whose content type is exactly
``application/json``.
"""

from __future__ import annotations

from typing import Any

from django.db import DatabaseError
from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions as drf_exceptions
from rest_framework import status

from assets_app.edge.errors import ErrorHandler
from assets_app.exceptions import AssetsError

# DRF error codes → the error types Airflow's (pydantic) validation errors use.
_TYPE_NAMES = {
    "required": "missing",
    "null": "missing",
    "invalid": "value_error",
    "blank": "string_too_short",
    "min_length": "string_too_short",
    "max_length": "string_too_long",
    "not_a_list": "list_type",
    "not_a_dict": "dict_type",
    "invalid_choice": "literal_error",
}


class RequestValidationError(drf_exceptions.APIException):
    """422 with the per-field list; ``errors`` are already ``{"loc", "msg", "type"}`` dicts."""

    status_code = status.HTTP_422_UNPROCESSABLE_ENTITY
    default_code = "validation_error"

    def __init__(self, errors: list[dict[str, Any]]) -> None:
        super().__init__(detail="validation error")
        self.errors = errors


class InvalidToken(drf_exceptions.APIException):
    """A token was sent but is unusable: 403 (a missing token is 401)."""

    status_code = status.HTTP_403_FORBIDDEN
    default_detail = "Invalid auth token"
    default_code = "invalid_token"


class BadRequest(drf_exceptions.APIException):
    status_code = status.HTTP_400_BAD_REQUEST
    default_code = "bad_request"


def validation_errors(errors: Any, *, location: str = "body") -> list[dict[str, Any]]:
    """Flatten DRF's nested ``serializer.errors`` into ``[{"loc", "msg", "type"}]``."""
    flat: list[dict[str, Any]] = []

    def walk(node: Any, loc: list[str | int]) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "non_field_errors":
                    walk(value, loc)
                else:
                    walk(value, [*loc, key])
        elif isinstance(node, list):
            for index, value in enumerate(node):
                if isinstance(value, dict | list):
                    walk(value, [*loc, index])
                else:
                    walk(value, loc)
        elif node:
            code = getattr(node, "code", None) or "value_error"
            flat.append({"loc": loc, "msg": str(node), "type": _TYPE_NAMES.get(code, code)})

    walk(errors, [location])
    return flat


def _error_body(reason: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"detail": {"reason": reason, "message": message, **extra}}


class ExecutionErrors(ErrorHandler):
    """The execution API's error bodies (see the module docstring)."""

    api_name = "the execution API"

    def domain_error_body(self, exc: AssetsError) -> Any:
        return _error_body(exc.code, exc.message, **exc.context)

    def api_error(self, exc: drf_exceptions.APIException) -> tuple[int, Any]:
        if isinstance(exc, RequestValidationError):
            return exc.status_code, {"detail": exc.errors}
        if isinstance(exc, drf_exceptions.ValidationError):
            return status.HTTP_422_UNPROCESSABLE_ENTITY, {"detail": validation_errors(exc.detail)}
        if isinstance(exc, drf_exceptions.ParseError):
            invalid = {"loc": ["body"], "msg": str(exc.detail), "type": "json_invalid"}
            return status.HTTP_422_UNPROCESSABLE_ENTITY, {"detail": [invalid]}
        detail = exc.detail
        if isinstance(detail, dict) and "reason" in detail:
            return exc.status_code, {"detail": {key: str(value) for key, value in detail.items()}}
        reason = exc.get_codes()
        return exc.status_code, _error_body(
            reason if isinstance(reason, str) else exc.default_code, str(detail)
        )

    def server_error_body(self, exc: Exception) -> Any:
        if isinstance(exc, DatabaseError):
            return _error_body("database_error", "A database error occurred; nothing was written")
        return _error_body("internal_error", "Internal server error")


#: The ``REST_FRAMEWORK["EXCEPTION_HANDLER"]`` of the execution API.
exception_handler = ExecutionErrors()


@csrf_exempt
def not_found(request: Any, *args: Any, **kwargs: Any) -> JsonResponse:
    """Catch-all for unknown ``/execution/`` paths: 404 as JSON, never a redirect or HTML."""
    return JsonResponse(
        _error_body("not_found", f"No route for {request.method} {request.path}"),
        status=status.HTTP_404_NOT_FOUND,
    )
