"""Errors of the execution API and the one handler that shapes every error body
(docs/api-execution.md).

- ``{"detail": {"reason": "<code>", "message": "<text>", ...}}`` for every error, with the
  domain error's extra context (``previous_state``, ``current_hostname`` …) merged in;
- 422 ``{"detail": [{"loc": [...], "msg": "...", "type": "..."}]}`` for validation errors,
  one entry per bad field;
- anything unexpected (a database failure included) is logged and answered 500 as JSON, so
  that the real client retries it.

Responses are rendered by DRF's ``JSONRenderer``, whose content type is exactly
``application/json``.
"""

from __future__ import annotations

import logging
from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import DatabaseError
from django.http import Http404, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions as drf_exceptions
from rest_framework import status
from rest_framework.response import Response
from rest_framework.serializers import as_serializer_error
from rest_framework.views import set_rollback

from assets_app.exceptions import (
    AssetsError,
    ConflictError,
    InvalidInputError,
    NotFoundError,
    RetryableError,
    TokenError,
)

logger = logging.getLogger(__name__)

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


class PayloadTooLarge(drf_exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "Request body is too large"
    default_code = "payload_too_large"


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


#: The HTTP status of each family of domain errors; an error takes its nearest family's.
DOMAIN_ERROR_STATUS: dict[type[AssetsError], int] = {
    NotFoundError: status.HTTP_404_NOT_FOUND,
    ConflictError: status.HTTP_409_CONFLICT,
    InvalidInputError: status.HTTP_400_BAD_REQUEST,
    TokenError: status.HTTP_403_FORBIDDEN,
    RetryableError: status.HTTP_503_SERVICE_UNAVAILABLE,  # the client retries 5xx
    AssetsError: status.HTTP_400_BAD_REQUEST,
}


def domain_error_status(exc: AssetsError) -> int:
    return next(DOMAIN_ERROR_STATUS[k] for k in type(exc).__mro__ if k in DOMAIN_ERROR_STATUS)


def _error_body(reason: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"detail": {"reason": reason, "message": message, **extra}}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response:
    """The ``REST_FRAMEWORK["EXCEPTION_HANDLER"]`` of the execution API."""
    set_rollback()
    exc = _as_api_exception(exc)
    if isinstance(exc, AssetsError):
        return Response(
            _error_body(exc.code, exc.message, **exc.context), status=domain_error_status(exc)
        )
    if isinstance(exc, RequestValidationError):
        return Response({"detail": exc.errors}, status=exc.status_code)
    if isinstance(exc, drf_exceptions.ValidationError):
        return Response(
            {"detail": validation_errors(exc.detail)},
            status=status.HTTP_422_UNPROCESSABLE_ENTITY,
        )
    if isinstance(exc, drf_exceptions.ParseError):
        return Response(
            {"detail": [{"loc": ["body"], "msg": str(exc.detail), "type": "json_invalid"}]},
            status=status.HTTP_422_UNPROCESSABLE_ENTITY,
        )
    if isinstance(exc, drf_exceptions.APIException):
        return _api_exception_response(exc)
    if isinstance(exc, DatabaseError):
        logger.error("database error in the execution API; rolled back", exc_info=exc)
        return Response(
            _error_body("database_error", "A database error occurred; nothing was written"),
            status=status.HTTP_500_INTERNAL_SERVER_ERROR,
        )
    logger.error("unhandled error in the execution API", exc_info=exc)
    return Response(
        _error_body("internal_error", "Internal server error"),
        status=status.HTTP_500_INTERNAL_SERVER_ERROR,
    )


def _as_api_exception(exc: Exception) -> Exception:
    """Django's own errors as the DRF errors they mean; any other error as it is."""
    if isinstance(exc, RequestDataTooBig):
        return PayloadTooLarge()
    if isinstance(exc, DjangoValidationError):
        return drf_exceptions.ValidationError(as_serializer_error(exc))
    if isinstance(exc, Http404):
        return drf_exceptions.NotFound()
    if isinstance(exc, DjangoPermissionDenied):
        return drf_exceptions.PermissionDenied()
    return exc


def _api_exception_response(exc: drf_exceptions.APIException) -> Response:
    """Airflow's ``{"detail": {"reason", "message"}}`` body for a DRF error, with its headers."""
    headers: dict[str, str] = {}
    if getattr(exc, "auth_header", None):
        headers["WWW-Authenticate"] = exc.auth_header  # type: ignore[attr-defined]
    if getattr(exc, "wait", None):
        headers["Retry-After"] = str(exc.wait)  # type: ignore[attr-defined]
    detail = exc.detail
    if isinstance(detail, dict) and "reason" in detail:
        body = {"detail": {key: str(value) for key, value in detail.items()}}
    else:
        reason = exc.get_codes()
        body = _error_body(reason if isinstance(reason, str) else exc.default_code, str(detail))
    return Response(body, status=exc.status_code, headers=headers)


@csrf_exempt
def not_found(request: Any, *args: Any, **kwargs: Any) -> JsonResponse:
    """Catch-all for unknown ``/execution/`` paths: 404 as JSON, never a redirect or HTML."""
    return JsonResponse(
        _error_body("not_found", f"No route for {request.method} {request.path}"),
        status=status.HTTP_404_NOT_FOUND,
    )
