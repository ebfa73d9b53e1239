"""How every API answers an error: the status decision and the mechanics, shared; the body, each
face's own.

- :data:`DOMAIN_ERROR_STATUS` gives each family of domain errors (:mod:`assets_app.exceptions`)
  its HTTP status; an error takes its nearest family's. The exception classes carry no HTTP.
- A database outage (:mod:`assets_app.edge.outage`) is a 503 with ``Retry-After``, not a 500.
- :func:`error_headers`: ``Retry-After`` on a :class:`~assets_app.exceptions.RetryableError`
  (503: the same request may succeed) and on DRF's throttling, ``WWW-Authenticate`` on a
  missing login.
- :class:`ErrorHandler`: the exception handler of a face. It reads Django's own errors as
  DRF's, calls DRF's ``set_rollback()`` before answering any error (a view run in
  ``ATOMIC_REQUESTS`` writes nothing), logs anything unexpected and answers it 500. A face
  subclasses it with its bodies only: the execution API's ``{"detail": {"reason",
  "message"}}``, the operator API's ``{"detail", "code"}``, Airflow's public API's
  ``{"detail": "..."}``.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import DatabaseError
from django.http import Http404
from rest_framework import exceptions as drf
from rest_framework import status
from rest_framework.response import Response
from rest_framework.serializers import as_serializer_error
from rest_framework.views import set_rollback

from assets_app.edge.outage import DatabaseUnavailableError, OutageRetryMixin, is_outage
from assets_app.exceptions import (
    AssetsError,
    ConflictError,
    InvalidInputError,
    NotFoundError,
    RetryableError,
    SecretsError,
    TokenError,
)

logger = logging.getLogger(__name__)

#: The HTTP status of each family of domain errors, on every API.
DOMAIN_ERROR_STATUS: Final[Mapping[type[AssetsError], int]] = MappingProxyType(
    {
        InvalidInputError: status.HTTP_400_BAD_REQUEST,
        # a secret that cannot be stored (no FERNET_KEY) or read (no key decrypts it) is
        # refused, nothing written (docs/secrets.md)
        SecretsError: status.HTTP_400_BAD_REQUEST,
        TokenError: status.HTTP_403_FORBIDDEN,
        NotFoundError: status.HTTP_404_NOT_FOUND,
        ConflictError: status.HTTP_409_CONFLICT,
        # the same request may succeed: every client retries a 5xx, and Retry-After says when
        RetryableError: status.HTTP_503_SERVICE_UNAVAILABLE,
        # a domain error of no family above is a bug (tests/assets_app/test_edge.py)
        AssetsError: status.HTTP_500_INTERNAL_SERVER_ERROR,
    }
)

#: Seconds a client should wait before retrying a ``RetryableError`` (``Retry-After``).
RETRY_AFTER_SECONDS: Final = 1


def domain_error_status(exc: AssetsError) -> int:
    """The status of ``exc``'s nearest family in :data:`DOMAIN_ERROR_STATUS`."""
    return next(DOMAIN_ERROR_STATUS[k] for k in type(exc).__mro__ if k in DOMAIN_ERROR_STATUS)


def error_headers(exc: Exception) -> dict[str, str]:
    """The headers of the answer to ``exc``."""
    if isinstance(exc, RetryableError):
        return {"Retry-After": str(RETRY_AFTER_SECONDS)}
    headers: dict[str, str] = {}
    auth_header = getattr(exc, "auth_header", None)  # set by DRF's ``APIView`` on a 401
    if auth_header:
        headers["WWW-Authenticate"] = str(auth_header)
    wait = getattr(exc, "wait", None)  # ``Throttled``
    if wait:
        headers["Retry-After"] = str(int(wait))
    return headers


class PayloadTooLarge(drf.APIException):
    """A request body over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` bytes (``assets_app.edge.parsers``)."""

    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "payload_too_large"

    def __init__(self) -> None:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        super().__init__(f"Request body is too large (at most {limit} bytes)")


def as_api_exception(exc: Exception) -> Exception:
    """Django's own errors as the DRF errors they mean; any other error as it is."""
    if isinstance(exc, RequestDataTooBig):
        return PayloadTooLarge()
    if isinstance(exc, DjangoValidationError):
        return drf.ValidationError(as_serializer_error(exc))
    if isinstance(exc, Http404):
        return drf.NotFound(str(exc) or None)
    if isinstance(exc, DjangoPermissionDenied):
        return drf.PermissionDenied()
    return exc


class ErrorHandler(ABC):
    """A face's ``EXCEPTION_HANDLER``: ``handler(exc, context)`` answers every error of a view.

    The status of a domain error is :func:`domain_error_status`'s, of a DRF error its own
    unless the face says otherwise (:meth:`api_error`); the headers are
    :func:`error_headers`'; the body is the face's.
    """

    #: the API's name in log lines
    api_name = "the API"

    def __call__(self, exc: Exception, context: Mapping[str, Any]) -> Response:
        set_rollback()
        if is_outage(exc):  # 503; an OutageRetryMixin view runs the request again
            view = context.get("view")
            if isinstance(view, OutageRetryMixin):
                view.database_outage = exc
            logger.info("database unavailable in %s: %s", self.api_name, exc)
            unavailable = DatabaseUnavailableError()
            return Response(
                self.domain_error_body(unavailable),
                status=domain_error_status(unavailable),
                headers=error_headers(unavailable),
            )
        exc = self.translate(exc)
        if isinstance(exc, AssetsError):
            status_code = domain_error_status(exc)
            if status_code >= status.HTTP_500_INTERNAL_SERVER_ERROR:
                logger.warning(
                    "%s answered %s (%s)", self.api_name, status_code, exc.code, exc_info=exc
                )
            data = self.domain_error_body(exc)
        elif isinstance(exc, drf.APIException):
            status_code, data = self.api_error(exc)
        else:
            if isinstance(exc, DatabaseError):
                logger.error("database error in %s; rolled back", self.api_name, exc_info=exc)
            else:
                logger.error("unhandled error in %s", self.api_name, exc_info=exc)
            status_code, data = status.HTTP_500_INTERNAL_SERVER_ERROR, self.server_error_body(exc)
        return Response(data, status=status_code, headers=error_headers(exc))

    def translate(self, exc: Exception) -> Exception:
        """``exc`` as the handler reads it (Django's errors as DRF's)."""
        return as_api_exception(exc)

    @abstractmethod
    def domain_error_body(self, exc: AssetsError) -> Any:
        """The body of a domain error."""

    @abstractmethod
    def api_error(self, exc: drf.APIException) -> tuple[int, Any]:
        """The status and body of a DRF error (``exc.status_code``, unless the face maps it)."""

    @abstractmethod
    def server_error_body(self, exc: Exception) -> Any:
        """The body of a 500: a database failure (``DatabaseError``) or a bug."""
