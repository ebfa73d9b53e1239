"""The operator API's error bodies: DRF's standard format, plus a stable ``code``.

- validation errors: ``{"<field>": ["<message>", ...], ...}`` (400), one key per bad field,
  query parameters included (``{"after": ["Enter a valid date/time."]}``);
- every other error: ``{"detail": "<message>", "code": "<code>"}`` with the HTTP status;
- domain errors of :mod:`assets_app.exceptions` with the status the edge kit gives their
  family (:data:`assets_app.edge.errors.DOMAIN_ERROR_STATUS`), their ``code`` and extra
  context kept;
- a database failure or a bug: logged, rolled back, 500 with the same shape.

The status of a domain error, the headers and the rollback are the edge kit's
(:class:`assets_app.edge.errors.ErrorHandler`). Only the operator API's views use this handler
(:class:`operatorapi.views.OperatorAPIMixin`); the project-wide
``REST_FRAMEWORK["EXCEPTION_HANDLER"]`` stays the execution API's.
"""

from __future__ import annotations

from typing import Any

from django.db import DatabaseError
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions as drf_exceptions
from rest_framework import status

from assets_app.edge.errors import ErrorHandler
from assets_app.exceptions import AssetsError


def _error(detail: str, code: str) -> dict[str, Any]:
    return {"detail": detail, "code": code}


class OperatorErrors(ErrorHandler):
    """The operator API's error bodies (see the module docstring)."""

    api_name = "the operator API"

    def domain_error_body(self, exc: AssetsError) -> Any:
        return {**_error(exc.message, exc.code), **exc.context}

    def api_error(self, exc: drf_exceptions.APIException) -> tuple[int, Any]:
        if isinstance(exc, drf_exceptions.ValidationError):
            return exc.status_code, exc.detail
        codes = exc.get_codes()
        return exc.status_code, _error(
            str(exc.detail), codes if isinstance(codes, str) else exc.default_code
        )

    def server_error_body(self, exc: Exception) -> Any:
        if isinstance(exc, DatabaseError):
            return _error("A database error occurred; nothing was written", "database_error")
        return _error("Internal server error", "internal_error")


#: The handler of every operator API view.
exception_handler = OperatorErrors()


@csrf_exempt
def not_found(request: HttpRequest, *args: Any, **kwargs: Any) -> JsonResponse:
    """Catch-all for unknown ``/api/v1/`` paths: a JSON 404, never a redirect or HTML."""
    return JsonResponse(
        _error(f"No route for {request.method} {request.path}", "not_found"),
        status=status.HTTP_404_NOT_FOUND,
    )
