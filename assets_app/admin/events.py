"""Asset events and the alias → event links (read-only, big tables)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.views.main import ChangeList
from django.db.models import Prefetch, QuerySet
from django.http import HttpRequest
from django.utils.safestring import SafeString

from assets_app.admin.common import (
    EMPTY,
    AssetColumnsMixin,
    BigTableAdminMixin,
    LinkedEventColumnsMixin,
    ReadOnlyAdminMixin,
    WaitingDag,
    change_link,
    change_url,
    consumers,
    link_list,
    pretty_json,
    run_link,
    source_links,
    source_run_pk,
    task_link,
    when,
)
from assets_app.admin.filters import (
    AliasFilter,
    EventSourceFilter,
    SourceAliasFilter,
    SourceDagFilter,
)
from assets_app.admin.panels import waiting_consumers
from assets_app.models import AssetAliasAssetEvent, AssetEvent, Dag, DagRun
from assets_app.selectors.assets import asset_events_search


class EventChangeList(ChangeList):
    """The event list's page, each event told the consumers still waiting on it (the
    scheduler's rule for the whole page at once, ``panels.waiting_consumers``: what the
    overview shows)."""

    def get_results(self, request: HttpRequest) -> None:
        super().get_results(request)
        waiting = waiting_consumers(self.result_list)
        for event in self.result_list:
            event.waiting_consumers = waiting[event.pk]


@admin.register(AssetEvent)
class AssetEventAdmin(
    AssetColumnsMixin, BigTableAdminMixin, ReadOnlyAdminMixin, admin.ModelAdmin[AssetEvent]
):
    # the list fits 1400 px: the uri, map index and extra are on the event's page
    list_display = (
        "id",
        "at",
        "asset_name",
        "source",
        "partition_key",
        "source_alias_names",
        "consumer_runs",
    )
    list_select_related = ("asset",)
    date_hierarchy = "timestamp"  # drawn by {% range_date_hierarchy %}: no DISTINCT scan
    list_filter = (
        ("timestamp", admin.DateFieldListFilter),
        SourceDagFilter,
        SourceAliasFilter,
        EventSourceFilter,
    )
    # what get_search_results matches, answered from the indexes (selectors.asset_events_search)
    search_fields = ("asset__name", "asset__uri", "=source_dag_id", "=source_run_id")
    search_help_text = "Asset name or uri (contains), or an exact source DAG id or run id."
    ordering = ("-timestamp", "-id")
    fields = (
        "id",
        "at",
        "asset_name",
        "asset_uri",
        "source_dag",
        "source_task",
        "source_run",
        "source_map_index",
        "partition_key",
        "source_alias_names",
        "consumer_runs",
        "extra_pretty",
    )
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[AssetEvent]:
        # select_related also on the change page: a deleted asset then reads as None
        return (
            super()
            .get_queryset(request)
            .select_related("asset")
            .annotate(source_run_pk=source_run_pk())
            .prefetch_related(
                "source_aliases",
                Prefetch("created_dagruns", queryset=DagRun.objects.order_by("id")),
            )
        )

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return EventChangeList

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[AssetEvent], search_term: str
    ) -> tuple[QuerySet[AssetEvent], bool]:
        return asset_events_search(events=queryset, term=search_term), False

    @admin.display(description="timestamp", ordering="timestamp")
    def at(self, obj: AssetEvent) -> SafeString | str:
        return when(obj.timestamp)

    @admin.display(description="source aliases")
    def source_alias_names(self, obj: AssetEvent) -> SafeString | str:
        return link_list(
            (change_url("assetalias", alias.pk), alias.name) for alias in obj.source_aliases.all()
        )

    @admin.display(description="source (DAG . task @ run)")
    def source(self, obj: AssetEvent) -> SafeString | str:
        return source_links(
            obj.source_dag_id,
            obj.source_task_id,
            getattr(obj, "source_run_pk", None),
            obj.source_run_id,
        )

    @admin.display(description="consumers: runs it triggered · DAGs waiting")
    def consumer_runs(self, obj: AssetEvent) -> SafeString | str:
        waiting: list[WaitingDag] | None = getattr(obj, "waiting_consumers", None)
        if waiting is None:  # the event's own page
            waiting = waiting_consumers([obj])[obj.pk]
        return consumers(obj.created_dagruns.all(), waiting)

    @admin.display(description="source DAG")
    def source_dag(self, obj: AssetEvent) -> SafeString | str:
        if obj.source_dag_id is None:
            return "manual (no task)"
        if not Dag.objects.filter(pk=obj.source_dag_id).exists():
            return obj.source_dag_id or EMPTY
        return change_link("dag", obj.source_dag_id, obj.source_dag_id)

    @admin.display(description="source task")
    def source_task(self, obj: AssetEvent) -> SafeString | str:
        return task_link(obj.source_dag_id, obj.source_task_id)

    @admin.display(description="source run")
    def source_run(self, obj: AssetEvent) -> SafeString | str:
        return run_link(getattr(obj, "source_run_pk", None), obj.source_run_id)

    @admin.display(description="extra")
    def extra_pretty(self, obj: AssetEvent) -> SafeString:
        return pretty_json(obj.extra)


@admin.register(AssetAliasAssetEvent)
class AssetAliasAssetEventAdmin(
    LinkedEventColumnsMixin,
    BigTableAdminMixin,
    ReadOnlyAdminMixin,
    admin.ModelAdmin[AssetAliasAssetEvent],
):
    list_display = ("id", "alias_link", "event_link", "event_asset", "event_timestamp")
    list_display_links = ("id",)
    list_select_related = ("alias", "event__asset")
    list_filter = (AliasFilter,)
    search_fields = ("alias__name", "event__asset__name", "event__asset__uri")
    ordering = ("-id",)
    fields = ("id", "alias_link", "event_link", "event_asset", "event_timestamp")
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[AssetAliasAssetEvent]:
        return super().get_queryset(request).select_related("alias", "event__asset")

    @admin.display(description="alias", ordering="alias__name")
    def alias_link(self, obj: AssetAliasAssetEvent) -> SafeString:
        return change_link("assetalias", obj.alias_id, obj.alias.name)
