"""Errors of the public API in Airflow's shapes: ``{"detail": "..."}`` (FastAPI's
``HTTPException``) and, for bad input, ``{"detail": [<pydantic error>, ...]}`` with 422."""

from __future__ import annotations

import logging
from typing import Any

from django.http import Http404, HttpRequest, JsonResponse
from rest_framework import exceptions as drf
from rest_framework import status
from rest_framework.response import Response

from assets_app.exceptions import (
    AssetsError,
    ConflictError,
    InvalidInputError,
    NotFoundError,
)

logger = logging.getLogger(__name__)


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


_DOMAIN = (
    (NotFoundError, status.HTTP_404_NOT_FOUND),
    (ConflictError, status.HTTP_409_CONFLICT),
    (InvalidInputError, status.HTTP_400_BAD_REQUEST),
)


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """Every refusal as Airflow words it; anything unmapped is left to become a logged 500."""
    if isinstance(exc, Unprocessable):
        return Response({"detail": exc.errors}, status=exc.status_code)
    if isinstance(exc, drf.NotAuthenticated | drf.AuthenticationFailed):
        detail = "Not authenticated" if isinstance(exc, drf.NotAuthenticated) else str(exc.detail)
        return Response({"detail": detail}, status=401, headers={"WWW-Authenticate": "Bearer"})
    if isinstance(exc, drf.PermissionDenied):
        return Response({"detail": str(exc.detail)}, status=403)
    if isinstance(exc, Http404):
        return Response({"detail": "Not Found"}, status=404)
    if isinstance(exc, AssetsError):
        for family, code in _DOMAIN:
            if isinstance(exc, family):
                return Response({"detail": exc.message}, status=code)
        logger.error("unmapped domain error %s: %s", exc.code, exc.message)
        return None
    if isinstance(exc, drf.MethodNotAllowed):
        return Response({"detail": "Method Not Allowed"}, status=405)
    if isinstance(exc, drf.ParseError | drf.UnsupportedMediaType | drf.NotAcceptable):
        return Response({"detail": str(exc.detail)}, status=exc.status_code)
    if isinstance(exc, drf.APIException):
        return Response({"detail": exc.detail}, status=exc.status_code)
    return None


def not_found(request: HttpRequest, *args: Any, **kwargs: Any) -> JsonResponse:
    """Any other path under ``/api/v2/``: FastAPI's 404."""
    return JsonResponse({"detail": "Not Found"}, status=404)
