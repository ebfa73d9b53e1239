"""Request bodies of the APIs, at most ``DATA_UPLOAD_MAX_MEMORY_SIZE`` bytes
(``EXECUTION_API_MAX_BODY_BYTES``): a longer one, declared or sent, is
:class:`~assets_app.edge.errors.PayloadTooLarge` (413), before any of it is decoded.

``/execution/`` and ``/api/v1/`` read JSON through :class:`JSONBodyParser` (the execution API
with its own decoding); ``/api/v2/`` reads the raw body with :func:`request_body` and validates
it as FastAPI does. A chunked body was read, up to the cap and one byte, by
``config.middleware.ChunkedBodyMiddleware``, which declares its length.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from django.conf import settings
from django.http import HttpRequest
from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser
from rest_framework.utils.json import strict_constant

from assets_app.edge.errors import PayloadTooLarge


class _Readable(Protocol):
    def read(self, size: int = ..., /) -> bytes: ...


def _refuse_declared_length(declared: str | None) -> int | None:
    """The cap, once the declared length (``Content-Length``) is within it."""
    limit: int | None = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    try:
        length = int(declared or 0)
    except ValueError:
        length = 0
    if limit is not None and length > limit:
        raise PayloadTooLarge()
    return limit


def body_read(stream: _Readable, *, declared: str | None) -> bytes:
    """Read a body of declared length ``declared`` from ``stream``: at most the cap."""
    limit = _refuse_declared_length(declared)
    if limit is None:
        return stream.read()
    raw = stream.read(limit + 1)
    if len(raw) > limit:
        raise PayloadTooLarge()
    return raw


def request_body(request: HttpRequest) -> bytes:
    """The whole body of ``request`` (``request.body``, which reads no more than the declared
    length), refused when that length is over the cap."""
    _refuse_declared_length(request.META.get("CONTENT_LENGTH"))
    return request.body


class JSONBodyParser(BaseParser):
    """JSON bodies under the cap. :meth:`decode` reads strict JSON (UTF-8, no ``NaN`` or
    ``Infinity``); anything else is DRF's ``ParseError`` (``JSON parse error - …``)."""

    media_type = "application/json"

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        request = (parser_context or {}).get("request")
        declared = request.META.get("CONTENT_LENGTH") if request is not None else None
        return self.decode(body_read(stream, declared=declared))

    def decode(self, raw: bytes) -> Any:
        """The JSON value of ``raw`` (a face may read it its own way)."""
        try:
            return json.loads(raw.decode("utf-8"), parse_constant=strict_constant)
        except (ValueError, RecursionError) as exc:
            raise ParseError(f"JSON parse error - {exc}") from exc
