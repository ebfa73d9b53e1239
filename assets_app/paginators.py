"""Paginators for admin lists over big, append-only tables."""

from __future__ import annotations

from typing import Any

from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.utils.functional import cached_property


class CappedCountPaginator(Paginator[Any]):
    """Counts at most ``max_count`` rows instead of running ``COUNT(*)`` over the whole table.

    The count is ``SELECT COUNT(*) FROM (SELECT id ... LIMIT max_count)``, so a list over
    millions of rows stays fast; pages past ``max_count`` rows are not offered (narrow the
    list with a filter or a search instead). Pair with ``show_full_result_count = False``.
    """

    max_count = 10_000

    @cached_property
    def count(self) -> int:
        if isinstance(self.object_list, QuerySet):
            bounded = self.object_list.order_by().prefetch_related(None).values("pk")
            return bounded[: self.max_count].count()
        return min(len(self.object_list), self.max_count)
