"""What every admin area shares: links, pretty JSON, durations, read-only and big-table mixins."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any, ClassVar, TypeVar
from urllib.parse import urlencode

from django.contrib import admin
from django.db.models import Count, Model, OuterRef, Subquery
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from assets_app.models import (
    Asset,
    AssetAliasAsset,
    AssetAliasAssetEvent,
    AssetDagRunQueue,
    AssetEvent,
    DagRunAssetEvent,
)
from assets_app.paginators import CappedCountPaginator

#: What a cell shows when there is nothing to show.
EMPTY = "-"


# --- links and formatting --------------------------------------------------------------------


def change_url(model_name: str, pk: Any) -> str:
    return reverse(f"admin:assets_app_{model_name}_change", args=[pk])


def changelist_url(model_name: str, **params: Any) -> str:
    query = urlencode(params)
    url = reverse(f"admin:assets_app_{model_name}_changelist")
    return f"{url}?{query}" if query else url


def change_link(model_name: str, pk: Any, text: Any) -> SafeString:
    """A link to the change page of one row."""
    return format_html('<a href="{}">{}</a>', change_url(model_name, pk), text)


def link_list(links: Iterable[tuple[str, Any]]) -> SafeString | str:
    """Comma-separated links from ``(url, text)`` pairs (``EMPTY`` when there are none)."""
    pairs = list(links)
    if not pairs:
        return EMPTY
    return format_html_join(", ", '<a href="{}">{}</a>', pairs)


def asset_link(asset: Asset | None, asset_id: int | None) -> SafeString | str:
    """A link to the asset, or ``deleted asset #id`` for an event that outlived its asset."""
    if asset is None:
        return f"deleted asset #{asset_id}" if asset_id is not None else EMPTY
    return change_link("asset", asset.pk, asset.name)


def asset_event_link(event_id: int) -> SafeString:
    return change_link("assetevent", event_id, f"event {event_id}")


def pretty_json(value: Any) -> SafeString:
    return format_html(
        '<pre style="margin:0; white-space:pre-wrap">{}</pre>',
        json.dumps(value, indent=2, sort_keys=True),
    )


def duration(delta: timedelta) -> str:
    """``1d 02h 03m``, ``2h 03m 04s`` or ``3m 04s`` (a negative delta is ``0m 00s``)."""
    seconds = max(int(delta.total_seconds()), 0)
    days, seconds = divmod(seconds, 86_400)
    hours, seconds = divmod(seconds, 3_600)
    minutes, seconds = divmod(seconds, 60)
    if days:
        return f"{days}d {hours:02d}h {minutes:02d}m"
    if hours:
        return f"{hours}h {minutes:02d}m {seconds:02d}s"
    return f"{minutes}m {seconds:02d}s"


def count_of(model: type[Model], *, pointing_at: str) -> Subquery:
    """How many ``model`` rows point at the listed row through the ``pointing_at`` foreign key
    (a correlated subquery, so a list page counts in its one query)."""
    return Subquery(
        model._default_manager.filter(**{pointing_at: OuterRef("pk")})
        .order_by()
        .values(pointing_at)
        .annotate(n=Count("*"))
        .values("n")
    )


# --- mixins ----------------------------------------------------------------------------------


class ReadOnlyAdminMixin:
    """Rows written by the system, shown but never added, changed or deleted here."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


_ChildT = TypeVar("_ChildT", bound=Model)
_ParentT = TypeVar("_ParentT", bound=Model)


class ReadOnlyTabularInline(ReadOnlyAdminMixin, admin.TabularInline[_ChildT, _ParentT]):
    extra = 0
    can_delete = False
    show_change_link = False


class BigTableAdminMixin:
    """No COUNT(*) over the whole table (see ``CappedCountPaginator``)."""

    show_full_result_count: ClassVar[bool] = False
    paginator: ClassVar[type] = CappedCountPaginator


class AssetColumnsMixin:
    """The ``asset_name`` (a link) and ``asset_uri`` columns of a row with an ``asset``."""

    @admin.display(description="asset", ordering="asset__name")
    def asset_name(self, obj: AssetEvent | AssetAliasAsset | AssetDagRunQueue) -> SafeString | str:
        return asset_link(obj.asset, obj.asset_id)

    @admin.display(description="asset uri", ordering="asset__uri")
    def asset_uri(self, obj: AssetEvent | AssetAliasAsset | AssetDagRunQueue) -> str:
        return obj.asset.uri if obj.asset is not None else EMPTY


class LinkedEventColumnsMixin:
    """The ``event_link``, ``event_asset`` and ``event_timestamp`` columns of a row that links
    something (an alias, a DAG run) to an asset event."""

    @admin.display(description="event")
    def event_link(self, obj: AssetAliasAssetEvent | DagRunAssetEvent) -> SafeString:
        return asset_event_link(obj.event_id)

    @admin.display(description="asset")
    def event_asset(self, obj: AssetAliasAssetEvent | DagRunAssetEvent) -> SafeString | str:
        return asset_link(obj.event.asset, obj.event.asset_id)

    @admin.display(description="timestamp", ordering="event__timestamp")
    def event_timestamp(self, obj: AssetAliasAssetEvent | DagRunAssetEvent) -> datetime:
        return obj.event.timestamp
