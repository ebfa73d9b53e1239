"""Keyset (cursor) pagination on one unique, indexed column: exact while rows arrive.

Each list orders by one unique column with an index (``-id`` for events and runs: newest
first; ``id`` or the primary key elsewhere) and a cursor holds the position of the last row
served, so the next page is ``WHERE id < position ORDER BY id DESC LIMIT n + 1``. Rows
inserted between two page requests land before the first page (higher ids) and never shift
the pages after it: walking the ``next`` links returns every row that was committed before
the first request exactly once, whatever is inserted meanwhile. (An offset paginator would
repeat rows; DRF's cursor on a non-unique column such as a timestamp falls back to offsets.)

Built on DRF's ``CursorPagination``: the cursor is opaque (base64); a cursor that does not
decode, carries an offset (never issued here), or a position that does not fit the column is
a 400 naming ``cursor``; a ``page_size`` that is not an integer from 1 to the maximum is a
400 naming ``page_size``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import QuerySet
from rest_framework import exceptions
from rest_framework.pagination import Cursor, CursorPagination
from rest_framework.request import Request
from rest_framework.views import APIView

INVALID_CURSOR = "Invalid cursor: use the 'next' or 'previous' link of a page as it is."


class KeysetPagination(CursorPagination):
    """The view names its column in ``cursor_ordering`` (e.g. ``"-id"``)."""

    page_size_query_param = "page_size"
    page_size_query_description = "Rows per page (1 to the maximum, default 100)."
    cursor_query_description = "The position to continue from: a 'next' or 'previous' link's."
    ordering = "-id"
    _queryset: QuerySet[Any] | None = None

    @staticmethod
    def _limits() -> tuple[int, int]:
        conf = settings.OPERATOR_API
        return conf["PAGE_SIZE"], conf["MAX_PAGE_SIZE"]

    def paginate_queryset(
        self,
        queryset: QuerySet[Any, Any] | Sequence[Any],
        request: Request,
        view: APIView | None = None,
    ) -> list[Any] | None:
        assert isinstance(queryset, QuerySet), "keyset pagination needs a queryset"
        self._queryset = queryset
        return super().paginate_queryset(queryset, request, view)

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

    def get_ordering(self, request: Request, queryset: QuerySet[Any], view: Any) -> tuple[str]:
        return (getattr(view, "cursor_ordering", self.ordering),)

    def decode_cursor(self, request: Request) -> Cursor | None:
        try:
            cursor: Cursor | None = super().decode_cursor(request)
        except exceptions.NotFound:
            raise exceptions.ValidationError({self.cursor_query_param: [INVALID_CURSOR]}) from None
        if cursor is None:
            return None
        if cursor.offset or cursor.position is None:
            raise exceptions.ValidationError({self.cursor_query_param: [INVALID_CURSOR]})
        assert self._queryset is not None
        field = self._queryset.model._meta.get_field(self.ordering[0].lstrip("-"))
        try:
            field.run_validators(field.to_python(cursor.position))
        except DjangoValidationError:
            raise exceptions.ValidationError({self.cursor_query_param: [INVALID_CURSOR]}) from None
        return cursor

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters: list[dict[str, Any]] = super().get_schema_operation_parameters(view)
        default, maximum = self._limits()
        for parameter in parameters:
            if parameter["name"] == self.page_size_query_param:
                parameter["schema"] = {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": maximum,
                    "default": default,
                }
        return parameters
