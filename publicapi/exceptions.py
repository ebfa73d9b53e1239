"""Errors of the public API in Airflow's shapes: ``{"detail": "..."}`` (FastAPI's
``HTTPException``) and, for bad input, ``{"detail": [<pydantic error>, ...]}`` with 422.

The status of a domain error, the headers and the rollback are the edge kit's
(:class:`assets_app.edge.errors.ErrorHandler`); only the bodies are this API's.
"""

from __future__ import annotations

from typing import Any

from django.db import DatabaseError
from django.http import Http404, HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions as drf
from rest_framework import status

from assets_app.edge.errors import ErrorHandler
from assets_app.exceptions import AssetsError


class Unprocessable(drf.APIException):
    status_code = status.HTTP_422_UNPROCESSABLE_ENTITY

    def __init__(self, errors: list[dict[str, Any]]) -> None:
        super().__init__()
        self.errors = errors


class BadRequest(drf.APIException):
    status_code = status.HTTP_400_BAD_REQUEST


class NotFound(drf.APIException):
    status_code = status.HTTP_404_NOT_FOUND


class Conflict(drf.APIException):
    status_code = status.HTTP_409_CONFLICT


class PublicErrors(ErrorHandler):
    """Every refusal as Airflow words it (see the module docstring)."""

    api_name = "the public API"

    def translate(self, exc: Exception) -> Exception:
        if isinstance(exc, Http404):
            return NotFound("Not Found")  # FastAPI's words
        return super().translate(exc)

    def domain_error_body(self, exc: AssetsError) -> Any:
        return {"detail": exc.message}

    def api_error(self, exc: drf.APIException) -> tuple[int, Any]:
        if isinstance(exc, Unprocessable):
            return exc.status_code, {"detail": exc.errors}
        if isinstance(exc, drf.NotAuthenticated):
            return exc.status_code, {"detail": "Not authenticated"}
        if isinstance(exc, drf.MethodNotAllowed):
            return exc.status_code, {"detail": "Method Not Allowed"}
        return exc.status_code, {"detail": exc.detail}

    def server_error_body(self, exc: Exception) -> Any:
        if isinstance(exc, DatabaseError):
            # Airflow's answer to a database error, its statement and error hidden (its default)
            return {
                "detail": {
                    "reason": "Database error",
                    "statement": "hidden",
                    "orig_error": "hidden",
                    "message": "Serious error when handling your request. Check logs for more "
                    "details",
                }
            }
        return {"detail": "Internal Server Error"}


#: The handler of every public API view (``publicapi.base.PublicView``).
exception_handler = PublicErrors()


@csrf_exempt  # a PATCH or POST to no route is a JSON 404 too, not the CSRF check's HTML 403
def not_found(request: HttpRequest, *args: Any, **kwargs: Any) -> JsonResponse:
    """Any other path under ``/api/v2/``: FastAPI's 404."""
    return JsonResponse({"detail": "Not Found"}, status=404)
