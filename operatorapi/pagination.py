"""Keyset (cursor) pagination on a unique, indexed key: exact while rows arrive.

Each list orders by a unique key that an index serves — ``(timestamp, id)`` newest first for
events (the timestamp index; ties broken by id), the id or the primary key elsewhere — and a
cursor holds the key of the last row served, so the next page is, for events,
``WHERE timestamp <= t AND (timestamp < t OR id < i) ORDER BY timestamp DESC, id DESC LIMIT
n + 1``: an index range, however deep the page and whatever the filters. The key of a row never
changes, so following the ``next`` links returns every row that was committed before the
first request exactly once, whatever is inserted or deleted meanwhile; an offset paginator
would repeat or skip rows, and DRF's ``CursorPagination`` keys on one column only.

``previous`` links walk the other way from the first row of a page (from the first page there
is none). The cursor is opaque (URL-safe base64 of JSON); one that does not decode, or whose
key does not fit the columns (a NUL character in a text, a time outside years 1 to 9999 in
UTC, as :mod:`operatorapi.params` rules), is a 400 naming ``cursor``; a ``page_size`` that is not an
integer from 1 to ``OPERATOR_API["MAX_PAGE_SIZE"]`` is a 400 naming ``page_size``.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import DateTimeField, Field, Model, Q, QuerySet
from rest_framework import exceptions
from rest_framework.pagination import BasePagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.urls import replace_query_param
from rest_framework.views import APIView

from operatorapi.params import has_nul, parse_datetime_parameter

INVALID_CURSOR = "Invalid cursor: use the 'next' or 'previous' link of a page as it is."


@dataclass(frozen=True)
class Cursor:
    """Where a page starts: after ``key`` in display order, or before it when ``reverse``."""

    key: tuple[Any, ...]
    reverse: bool = False


def _beyond(names: Sequence[str], key: Sequence[Any], *, descending: bool) -> Q:
    """Rows strictly after ``key`` in ``names`` order, as an index-friendly filter.

    ``(a, b) < (x, y)`` is written ``a <= x AND (a < x OR b < y)`` so that the leading range
    on ``a`` is an index range.
    """
    first, value = names[0], key[0]
    strict = Q(**{f"{first}__{'lt' if descending else 'gt'}": value})
    if len(names) == 1:
        return strict
    rest = _beyond(names[1:], key[1:], descending=descending)
    return Q(**{f"{first}__{'lte' if descending else 'gte'}": value}) & (strict | rest)


class KeysetPagination(BasePagination):
    """The view names its key in ``cursor_ordering`` (``("-timestamp", "-id")``, ``("id",)``);
    all of its columns go the same way and together they are unique."""

    cursor_query_param = "cursor"
    page_size_query_param = "page_size"

    def __init__(self) -> None:
        self.request: Request | None = None
        self.names: tuple[str, ...] = ()
        self.next_key: tuple[Any, ...] | None = None
        self.previous_key: tuple[Any, ...] | None = None

    @staticmethod
    def _limits() -> tuple[int, int]:
        conf = settings.OPERATOR_API
        return conf["PAGE_SIZE"], conf["MAX_PAGE_SIZE"]

    def paginate_queryset(
        self,
        queryset: QuerySet[Any, Any] | Sequence[Any],
        request: Request,
        view: APIView | None = None,
    ) -> list[Any]:
        assert isinstance(queryset, QuerySet), "keyset pagination needs a queryset"  # noqa: S101 - a view's bug, not input
        ordering: tuple[str, ...] = tuple(getattr(view, "cursor_ordering", ("id",)))
        descending = ordering[0].startswith("-")
        assert all(o.startswith("-") == descending for o in ordering), ordering  # noqa: S101 - a view's bug, not input
        self.request = request
        self.names = tuple(o.lstrip("-") for o in ordering)
        page_size = self.get_page_size(request)
        cursor = self.decode_cursor(request, queryset.model)
        reverse = cursor is not None and cursor.reverse
        walk_descending = descending != reverse  # the order the query reads rows in
        if cursor is not None:
            queryset = queryset.filter(_beyond(self.names, cursor.key, descending=walk_descending))
        queryset = queryset.order_by(*(f"-{n}" if walk_descending else n for n in self.names))
        rows = list(queryset[: page_size + 1])
        more, page = len(rows) > page_size, rows[:page_size]
        if reverse:
            page.reverse()
        first = self._key(page[0]) if page else None
        last = self._key(page[-1]) if page else None
        if reverse:
            assert cursor is not None  # noqa: S101 - narrows the type
            self.previous_key = first if more else None
            self.next_key = last or cursor.key  # the rows we came from
        else:
            self.next_key = last if more else None
            self.previous_key = (first or cursor.key) if cursor is not None else None
        return page

    def _key(self, row: Model) -> tuple[Any, ...]:
        return tuple(getattr(row, name) for name in self.names)

    def get_paginated_response(self, data: Any) -> Response:
        return Response(
            {
                "next": self._link(self.next_key, reverse=False),
                "previous": self._link(self.previous_key, reverse=True),
                "results": data,
            }
        )

    def _link(self, key: tuple[Any, ...] | None, *, reverse: bool) -> str | None:
        if key is None:
            return None
        assert self.request is not None  # noqa: S101 - narrows the type
        values = [v.isoformat() if isinstance(v, datetime) else v for v in key]
        body = json.dumps({"k": values, **({"r": True} if reverse else {})}, separators=(",", ":"))
        token = base64.urlsafe_b64encode(body.encode()).decode().rstrip("=")
        return replace_query_param(
            self.request.build_absolute_uri(), self.cursor_query_param, token
        )

    def get_page_size(self, request: Request) -> int:
        default, maximum = self._limits()
        raw = request.query_params.get(self.page_size_query_param)
        if raw is None:
            return default
        try:
            size = int(raw)
        except ValueError:
            size = 0
        if not 1 <= size <= maximum:
            raise exceptions.ValidationError(
                {self.page_size_query_param: [f"Must be an integer from 1 to {maximum}."]}
            )
        return size

    def decode_cursor(self, request: Request, model: type[Model]) -> Cursor | None:
        token = request.query_params.get(self.cursor_query_param)
        if token is None:
            return None
        try:
            body = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
            values, reverse = body["k"], body.get("r", False)
            if not isinstance(values, list) or len(values) != len(self.names):
                raise ValueError("wrong key length")
            if set(body) - {"k", "r"} or not isinstance(reverse, bool):
                raise ValueError("unexpected cursor fields")
            key = []
            for name, value in zip(self.names, values, strict=True):
                field = model._meta.get_field(name)
                assert isinstance(field, Field), name  # noqa: S101 - a view's bug, not input
                if not isinstance(value, str | int) or isinstance(value, bool) or has_nul(value):
                    raise ValueError(f"bad {name}")
                if isinstance(field, DateTimeField):
                    if not isinstance(value, str):
                        raise ValueError(f"bad {name}")
                    parsed: Any = parse_datetime_parameter(value, require_offset=True)
                else:
                    parsed = field.to_python(value)
                field.run_validators(parsed)
                key.append(parsed)
        except (ValueError, TypeError, KeyError, binascii.Error, DjangoValidationError):
            raise exceptions.ValidationError({self.cursor_query_param: [INVALID_CURSOR]}) from None
        return Cursor(key=tuple(key), reverse=reverse)

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        link = {"type": "string", "nullable": True, "format": "uri"}
        return {
            "type": "object",
            "required": ["results"],
            "properties": {"next": link, "previous": link, "results": schema},
        }

    def get_schema_operation_parameters(self, view: APIView) -> list[dict[str, Any]]:
        default, maximum = self._limits()
        return [
            {
                "name": self.cursor_query_param,
                "required": False,
                "in": "query",
                "description": "Where to continue: the cursor of a 'next' or 'previous' link.",
                "schema": {"type": "string"},
            },
            {
                "name": self.page_size_query_param,
                "required": False,
                "in": "query",
                "description": f"Rows per page (1 to {maximum}).",
                "schema": {"type": "integer", "minimum": 1, "maximum": maximum, "default": default},
            },
        ]
