"""Riding out a short database outage: a request whose transaction failed because the database
could not be reached (a restart, a failover, a dropped connection) is run again, not answered
500.

- :func:`is_outage`: the errors that mean "the database is unreachable or the connection
  broke", not "this request is wrong": Django's ``OperationalError`` and ``InterfaceError``
  (which also cover a deadlock or a serialization failure, for which a retry is as right).
- :class:`DatabaseUnavailableError`: how the error handler (:mod:`assets_app.edge.errors`)
  answers one: 503 with ``Retry-After``, which every client retries.
- :class:`OutageRetryMixin`: a DRF view that, when its handler answered an outage, closes the
  broken connection and runs the same request again, waiting 0.25 s, then twice as long each
  time up to 4 s, until ``DATABASE_OUTAGE_RETRY_SECONDS`` (30 s) have passed since it began;
  then the 503 goes out. Each use case is one transaction, so a failed attempt wrote nothing
  and running it again is safe. (A commit whose acknowledgement was lost with the connection
  is the one case where the first attempt may have written: its retry then meets its own
  write, as a client's retry would.)
"""

from __future__ import annotations

import io
import logging
import time
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import InterfaceError, OperationalError, connection
from django.http import HttpRequest, HttpResponseBase

from assets_app.exceptions import RetryableError

logger = logging.getLogger(__name__)

#: The first wait before running a request again, and the longest.
FIRST_WAIT = 0.25
LONGEST_WAIT = 4.0


def is_outage(exc: BaseException) -> bool:
    """Whether ``exc`` says the database could not be reached or the connection broke."""
    return isinstance(exc, OperationalError | InterfaceError)


class DatabaseUnavailableError(RetryableError):
    """The database could not be reached; the same request may succeed in a moment."""

    code = "database_unavailable"
    default_message = "The database is unavailable; nothing was written. Retry the request."


def _keep_body(request: HttpRequest) -> bool:
    """Read the body once (within the upload cap) so each attempt reads it again from the
    start; ``False`` when it cannot be kept (too large: that request fails on its own)."""
    try:
        request.body  # noqa: B018 - read and kept by Django
    except RequestDataTooBig:
        return False
    return True


class OutageRetryMixin:
    """Runs a request again while the database is unavailable (see the module docstring).

    The view's error handler sets :attr:`database_outage` when it answers an outage."""

    database_outage: BaseException | None = None

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        began = time.monotonic()
        deadline = began + settings.DATABASE_OUTAGE_RETRY_SECONDS
        replayable = _keep_body(request)
        wait = FIRST_WAIT
        attempt = 1
        while True:
            self.database_outage = None
            response: HttpResponseBase = super().dispatch(request, *args, **kwargs)  # type: ignore[misc]
            outage = self.database_outage
            if outage is None:
                if attempt > 1:
                    logger.warning(
                        "%s %s went through on attempt %d after %.1f s of database outage",
                        request.method,
                        request.path,
                        attempt,
                        time.monotonic() - began,
                    )
                return response
            if not replayable or time.monotonic() + wait > deadline:
                logger.warning(
                    "%s %s: database unavailable for %.1f s, answering 503: %s",
                    request.method,
                    request.path,
                    time.monotonic() - began,
                    outage,
                )
                return response
            connection.close()  # the broken connection; the next attempt opens a new one
            time.sleep(wait)
            wait = min(wait * 2, LONGEST_WAIT)
            attempt += 1
            request._stream = io.BytesIO(request.body)
            request._read_started = False
