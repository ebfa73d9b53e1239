"""The operator API's error bodies: DRF's standard format, plus a stable ``code``.

- validation errors: ``{"<field>": ["<message>", ...], ...}`` (400), one key per bad field,
  query parameters included (``{"after": ["Enter a valid date/time."]}``);
- every other error: ``{"detail": "<message>", "code": "<code>"}`` with the HTTP status;
- domain errors of :mod:`assets_app.exceptions` by family: ``NotFoundError`` 404,
  ``ConflictError`` 409, ``InvalidInputError`` 400 (any other ``AssetsError`` 400), their
  ``code`` and extra context kept;
- a database failure or a bug: logged, rolled back, 500 with the same shape.

Only the operator API's views use this handler (:class:`operatorapi.views.OperatorAPIMixin`);
the project-wide ``REST_FRAMEWORK["EXCEPTION_HANDLER"]`` stays the execution API's.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import DatabaseError
from django.http import Http404, HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions as drf_exceptions
from rest_framework import status
from rest_framework.response import Response
from rest_framework.serializers import as_serializer_error
from rest_framework.views import exception_handler as drf_exception_handler
from rest_framework.views import set_rollback

from assets_app.exceptions import AssetsError, ConflictError, InvalidInputError, NotFoundError

logger = logging.getLogger(__name__)


class PayloadTooLarge(drf_exceptions.APIException):
    """A body over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` bytes."""

    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "payload_too_large"

    def __init__(self) -> None:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        super().__init__(f"Request body is too large (at most {limit} bytes)")


class DomainError(drf_exceptions.APIException):
    """A domain error on its way to DRF's handler, with its family's status."""

    def __init__(self, exc: AssetsError, status_code: int) -> None:
        super().__init__(detail=exc.message, code=exc.code)
        self.status_code = status_code
        self.context = exc.context


#: The HTTP status of each family of domain errors; an error takes its nearest family's.
DOMAIN_ERROR_STATUS: dict[type[AssetsError], int] = {
    NotFoundError: status.HTTP_404_NOT_FOUND,
    ConflictError: status.HTTP_409_CONFLICT,
    InvalidInputError: status.HTTP_400_BAD_REQUEST,
    AssetsError: status.HTTP_400_BAD_REQUEST,
}


def _domain_status(exc: AssetsError) -> int:
    return next(DOMAIN_ERROR_STATUS[k] for k in type(exc).__mro__ if k in DOMAIN_ERROR_STATUS)


def _error(detail: str, code: str, status_code: int) -> Response:
    return Response({"detail": detail, "code": code}, status=status_code)


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response:
    """The operator API's handler (see the module docstring)."""
    if isinstance(exc, RequestDataTooBig):
        exc = PayloadTooLarge()
    elif isinstance(exc, DjangoValidationError):
        exc = drf_exceptions.ValidationError(as_serializer_error(exc))
    elif isinstance(exc, Http404):
        exc = drf_exceptions.NotFound(str(exc) or None)
    elif isinstance(exc, DjangoPermissionDenied):
        exc = drf_exceptions.PermissionDenied()
    elif isinstance(exc, AssetsError):
        exc = DomainError(exc, _domain_status(exc))

    response = drf_exception_handler(exc, context)
    if response is None:
        set_rollback()
        if isinstance(exc, DatabaseError):
            logger.error("database error in the operator API; rolled back", exc_info=exc)
            return _error("A database error occurred; nothing was written", "database_error", 500)
        logger.error("unhandled error in the operator API", exc_info=exc)
        return _error("Internal server error", "internal_error", 500)
    if isinstance(exc, drf_exceptions.APIException) and not isinstance(
        exc, drf_exceptions.ValidationError
    ):
        codes = exc.get_codes()
        response.data = {
            "detail": str(exc.detail),
            "code": codes if isinstance(codes, str) else exc.default_code,
            **(exc.context if isinstance(exc, DomainError) else {}),
        }
    return response


@csrf_exempt
def not_found(request: HttpRequest, *args: Any, **kwargs: Any) -> JsonResponse:
    """Catch-all for unknown ``/api/v1/`` paths: a JSON 404, never a redirect or HTML."""
    return JsonResponse(
        {"detail": f"No route for {request.method} {request.path}", "code": "not_found"},
        status=status.HTTP_404_NOT_FOUND,
    )
