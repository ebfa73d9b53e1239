"""Assets, aliases and the alias → asset links (editable; name and uri fixed once saved)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, TypedDict, TypeVar

from django.contrib import admin
from django.db.models import OuterRef, QuerySet, Subquery
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, path
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django_stubs_ext import WithAnnotations

from assets_app.admin.common import (
    EMPTY,
    AssetColumnsMixin,
    PanelAdmin,
    change_link,
    change_url,
    count_of,
    fact,
    ident,
    link_list,
    when,
)
from assets_app.admin.emit import EMIT_PERMISSION, emit_event_view
from assets_app.admin.filters import AliasFilter, AssetActiveFilter
from assets_app.admin.panels import asset_panel
from assets_app.models import Asset, AssetAlias, AssetAliasAsset, AssetEvent
from assets_app.selectors.assets import asset_declared_in
from assets_app.services.runs.watchers import asset_watchers_describe


class _LatestEvent(TypedDict):
    latest_event_timestamp: datetime | None
    latest_event_pk: int | None


class _LinkedAssets(TypedDict):
    linked_assets: int | None


_ParentT = TypeVar("_ParentT", Asset, AssetAlias)


class _AliasLinkInline(admin.TabularInline[AssetAliasAsset, _ParentT]):
    """The alias → asset links of one asset or one alias, editable with autocompletion."""

    model = AssetAliasAsset
    extra = 0


class AssetAliasLinkInline(_AliasLinkInline[Asset]):
    fk_name = "asset"
    autocomplete_fields = ("alias",)
    verbose_name = "alias"
    verbose_name_plural = "aliases resolving to this asset"


class AliasAssetLinkInline(_AliasLinkInline[AssetAlias]):
    fk_name = "alias"
    autocomplete_fields = ("asset",)
    verbose_name = "asset"
    verbose_name_plural = "assets this alias resolved to"


@admin.register(Asset)
class AssetAdmin(PanelAdmin[Asset]):
    list_display = ("asset", "uri_cell", "group", "is_active", "alias_names", "latest_event")
    list_display_links = ("asset",)
    list_select_related = ("active",)
    list_filter = (AssetActiveFilter, "group")
    search_fields = ("name", "uri")
    ordering = ("name", "uri")
    inlines = (AssetAliasLinkInline,)
    readonly_fields = ("is_active", "created", "updated")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Asset]:
        latest = AssetEvent.objects.filter(asset=OuterRef("pk")).order_by("-timestamp", "-id")
        return (
            super()
            .get_queryset(request)
            .annotate(
                latest_event_timestamp=Subquery(latest.values("timestamp")[:1]),
                latest_event_pk=Subquery(latest.values("pk")[:1]),
            )
            .prefetch_related("aliases")
        )

    def get_readonly_fields(self, request: HttpRequest, obj: Asset | None = None) -> Any:
        # name and uri identify the asset (and are mirrored in asset_active): fixed once saved
        if obj is not None:
            return ("name", "uri", *self.readonly_fields, "declared_by", "watchers")
        return self.readonly_fields

    @staticmethod
    def _declared_in(obj: Asset) -> list[str]:
        """The files that own the asset (once per object and request)."""
        if not hasattr(obj, "_declared_in"):
            obj._declared_in = asset_declared_in(asset_id=obj.pk)  # type: ignore[attr-defined]
        return obj._declared_in  # type: ignore[attr-defined,no-any-return]

    def has_change_permission(self, request: HttpRequest, obj: Asset | None = None) -> bool:
        # an asset a DAG file or manifest declares is the file's: its next load would undo an
        # edit here, so the page is read-only and says which file to edit
        if obj is not None and self._declared_in(obj):
            return False
        return super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Asset | None = None) -> bool:
        if obj is not None and self._declared_in(obj):
            return False
        return super().has_delete_permission(request, obj)

    @admin.display(description="declared by")
    def declared_by(self, obj: Asset) -> SafeString | str:
        files = self._declared_in(obj)
        if not files:
            return "no file: created here or by an event (editable)"
        return format_html(
            "{} <small>(read-only here: edit the file; its next load writes the asset)</small>",
            format_html_join(", ", "{}", ((ident(f),) for f in files)),
        )

    @admin.display(description="watchers")
    def watchers(self, obj: Asset) -> SafeString | str:
        """Its asset watchers (AIP-82): the running ones with their trigger and the
        triggerer running it; declared ones that do not run, and why."""
        rows = asset_watchers_describe(asset=obj)
        if not rows:
            return "none"
        return format_html(
            "<ul>{}</ul>",
            format_html_join(
                "",
                "<li>{} — {}: {}</li>",
                ((ident(row.name), ident(row.classpath), row.state) for row in rows),
            ),
        )

    @admin.display(description="name", ordering="name")
    def asset(self, obj: Asset) -> SafeString:
        return ident(obj.name)

    @admin.display(description="uri", ordering="uri")
    def uri_cell(self, obj: Asset) -> SafeString:
        return ident(obj.uri)

    @admin.display(description="active", ordering="active")
    def is_active(self, obj: Asset) -> SafeString:
        # a fact: an asset no declared DAG references any more is inactive, not broken
        return fact("active") if hasattr(obj, "active") else fact("inactive")

    @admin.display(description="created at")
    def created(self, obj: Asset) -> SafeString | str:
        return when(obj.created_at)

    @admin.display(description="updated at")
    def updated(self, obj: Asset) -> SafeString | str:
        return when(obj.updated_at)

    @admin.display(description="aliases")
    def alias_names(self, obj: Asset) -> SafeString | str:
        return link_list((change_url("assetalias", a.pk), a.name) for a in obj.aliases.all())

    @admin.display(description="latest event", ordering="latest_event_timestamp")
    def latest_event(self, obj: WithAnnotations[Asset, _LatestEvent]) -> SafeString | str:
        if obj.latest_event_pk is None:
            return EMPTY
        return format_html(
            '<a href="{}">{}</a>',
            change_url("assetevent", obj.latest_event_pk),
            when(obj.latest_event_timestamp),
        )

    def get_urls(self) -> list[URLPattern]:
        def emit(request: HttpRequest, object_id: str) -> HttpResponse:
            return emit_event_view(self, request, object_id)

        view = self.admin_site.admin_view(emit)
        return [
            path("<path:object_id>/emit/", view, name="assets_app_asset_emit"),
            *super().get_urls(),
        ]

    def panel_context(self, request: HttpRequest, obj: Asset) -> dict[str, Any]:
        # the events chart, the lineage and the latest events, and the emit button
        return {"panel": asset_panel(obj), "can_emit": request.user.has_perm(EMIT_PERMISSION)}


@admin.register(AssetAlias)
class AssetAliasAdmin(admin.ModelAdmin[AssetAlias]):
    list_display = ("alias", "group", "asset_count")
    list_display_links = ("alias",)
    list_filter = ("group",)
    search_fields = ("name",)
    ordering = ("name",)
    inlines = (AliasAssetLinkInline,)

    def get_queryset(self, request: HttpRequest) -> QuerySet[AssetAlias]:
        linked = count_of(AssetAliasAsset, pointing_at="alias")
        return super().get_queryset(request).annotate(linked_assets=linked)

    @admin.display(description="name", ordering="name")
    def alias(self, obj: AssetAlias) -> SafeString:
        return ident(obj.name)

    @admin.display(description="assets", ordering="linked_assets")
    def asset_count(self, obj: WithAnnotations[AssetAlias, _LinkedAssets]) -> int:
        return obj.linked_assets or 0


@admin.register(AssetAliasAsset)
class AssetAliasAssetAdmin(AssetColumnsMixin, admin.ModelAdmin[AssetAliasAsset]):
    list_display = ("id", "alias_link", "asset_name", "asset_uri")
    list_select_related = ("alias", "asset")
    list_filter = (AliasFilter,)
    search_fields = ("alias__name", "asset__name", "asset__uri")
    autocomplete_fields = ("alias", "asset")
    ordering = ("alias__name", "asset__name", "asset__uri")

    @admin.display(description="alias", ordering="alias__name")
    def alias_link(self, obj: AssetAliasAsset) -> SafeString:
        return change_link("assetalias", obj.alias_id, obj.alias.name)
