"""Request middleware the whole site needs."""

from __future__ import annotations

import io
from collections.abc import Callable

from django.conf import settings
from django.core.handlers.wsgi import LimitedStream
from django.http import HttpRequest, HttpResponse


class ChunkedBodyMiddleware:
    """Reads a chunked request body (``Transfer-Encoding: chunked``, no ``Content-Length``).

    gunicorn decodes the chunks, but Django reads a body only up to its ``Content-Length`` and
    would see none: a chunked ``PATCH …/state`` was parsed as empty and answered with a
    misleading 422. This reads the decoded body, at most ``DATA_UPLOAD_MAX_MEMORY_SIZE`` + 1
    bytes, and hands it on with that length; a body longer than the limit thus gets the same
    413 as one that declares its length.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        meta = request.META
        if "chunked" in meta.get("HTTP_TRANSFER_ENCODING", "").lower() and not meta.get(
            "CONTENT_LENGTH"
        ):
            limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
            stream = meta["wsgi.input"]
            body = stream.read(limit + 1) if limit is not None else stream.read()
            meta["CONTENT_LENGTH"] = str(len(body))
            request._stream = LimitedStream(io.BytesIO(body), len(body))  # type: ignore[assignment]
        return self.get_response(request)
