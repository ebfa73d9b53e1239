"""The operator's view of the registry (SPEC §6).

Event-like tables (asset events, alias → event links, DAG runs, task instances, the queue)
are read-only; DAGs come from manifests (``declare_dags``) and only their pause flag is
editable, through ``assets_app.services.dags``. List pages never query per row (FKs joined,
to-many relations prefetched for the page only) and the big lists count at most
``CappedCountPaginator.max_count`` rows instead of running ``COUNT(*)`` over the table.
Events survive deletion of their asset: such an event shows "deleted asset #id".
"""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

from django.contrib import admin, messages
from django.db.models import Count, OuterRef, Q, QuerySet, Subquery, Value
from django.db.models.functions import Upper
from django.db.models.lookups import Exact
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.text import smart_split, unescape_string_literal

from assets_app.conditions import condition_parse, condition_summary
from assets_app.exceptions import InvalidAssetExpression
from assets_app.models import (
    Asset,
    AssetAlias,
    AssetAliasAsset,
    AssetAliasAssetEvent,
    AssetDagRunQueue,
    AssetEvent,
    Dag,
    DagRun,
    DagRunAssetEvent,
    DagScheduleAssetAliasReference,
    DagScheduleAssetNameReference,
    DagScheduleAssetReference,
    DagScheduleAssetUriReference,
    TaskInletAssetReference,
    TaskInstance,
    TaskOutletAssetReference,
)
from assets_app.paginators import CappedCountPaginator
from assets_app.services.dags import dags_set_paused

LATEST_EVENTS_SHOWN = 10
#: An event search matching more assets than this filters by a subquery, not an id list.
SEARCH_MAX_ASSET_IDS = 1000
EMPTY = "-"


# --- helpers ---------------------------------------------------------------------------------


def _change_url(model_name: str, pk: Any) -> str:
    return reverse(f"admin:assets_app_{model_name}_change", args=[pk])


def _changelist_url(model_name: str, **params: Any) -> str:
    query = urlencode(params)
    url = reverse(f"admin:assets_app_{model_name}_changelist")
    return f"{url}?{query}" if query else url


def _asset_link(asset: Asset | None, asset_id: int | None) -> SafeString | str:
    if asset is None:
        return f"deleted asset #{asset_id}" if asset_id is not None else EMPTY
    return format_html('<a href="{}">{}</a>', _change_url("asset", asset.pk), asset.name)


def _pretty_json(value: Any) -> SafeString:
    return format_html(
        '<pre style="margin:0; white-space:pre-wrap">{}</pre>',
        json.dumps(value, indent=2, sort_keys=True),
    )


def _duration(delta: timedelta) -> str:
    seconds = max(int(delta.total_seconds()), 0)
    days, seconds = divmod(seconds, 86_400)
    hours, seconds = divmod(seconds, 3_600)
    minutes, seconds = divmod(seconds, 60)
    if days:
        return f"{days}d {hours:02d}h {minutes:02d}m"
    if hours:
        return f"{hours}h {minutes:02d}m {seconds:02d}s"
    return f"{minutes}m {seconds:02d}s"


class ReadOnlyAdminMixin:
    """Rows written by the system, shown but never added, changed or deleted here."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ReadOnlyTabularInline(ReadOnlyAdminMixin, admin.TabularInline):
    extra = 0
    can_delete = False
    show_change_link = False


class DagIdFilter(admin.SimpleListFilter):
    """Filter by DAG id, choices from the (small) ``dag`` table rather than a DISTINCT scan."""

    title = "DAG"
    parameter_name = "dag_id"
    field_path = "dag_id"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(dag_id, dag_id) for dag_id in Dag.objects.values_list("dag_id", flat=True)]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value():
            return queryset.filter(**{self.field_path: self.value()})
        return queryset


class SourceDagFilter(DagIdFilter):
    title = "source DAG"
    parameter_name = "source_dag"
    field_path = "source_dag_id"


class TargetDagFilter(DagIdFilter):
    title = "target DAG"
    parameter_name = "target_dag"
    field_path = "target_dag_id"


class AliasFilter(admin.SimpleListFilter):
    title = "alias"
    parameter_name = "alias"
    field_path = "alias_id"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(str(pk), name) for pk, name in AssetAlias.objects.values_list("pk", "name")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value():
            return queryset.filter(**{self.field_path: self.value()})
        return queryset


class SourceAliasFilter(AliasFilter):
    """Events emitted through an alias: ``id IN (the alias's linked event ids)``, not a join.

    A semi-join cannot repeat an event, and both databases can drive it from the link
    table's ``(alias_id, event_id)`` index instead of hashing against every event.
    """

    title = "source alias"
    parameter_name = "source_alias"

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value():
            links = AssetAliasAssetEvent.objects.filter(alias_id=self.value())
            return queryset.filter(pk__in=links.values("event_id"))
        return queryset


class EventSourceFilter(admin.SimpleListFilter):
    title = "source"
    parameter_name = "source"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("task", "a task"), ("manual", "manual (no task)")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value() == "task":
            return queryset.filter(source_dag_id__isnull=False)
        if self.value() == "manual":
            return queryset.filter(source_dag_id__isnull=True)
        return queryset


class AssetActiveFilter(admin.SimpleListFilter):
    title = "active"
    parameter_name = "active"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", "Yes"), ("no", "No")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value() in ("yes", "no"):
            return queryset.filter(active__isnull=self.value() == "no")
        return queryset


# --- assets and aliases ----------------------------------------------------------------------


class AssetAliasLinkInline(admin.TabularInline):
    model = AssetAliasAsset
    fk_name = "asset"
    extra = 0
    autocomplete_fields = ("alias",)
    verbose_name = "alias"
    verbose_name_plural = "aliases resolving to this asset"


@admin.register(Asset)
class AssetAdmin(admin.ModelAdmin):
    list_display = (
        "name",
        "uri",
        "group",
        "is_active",
        "alias_names",
        "latest_event_at",
        "updated_at",
    )
    list_select_related = ("active",)
    list_filter = (AssetActiveFilter, "group")
    search_fields = ("name", "uri")
    ordering = ("name", "uri")
    inlines = (AssetAliasLinkInline,)
    readonly_fields = (
        "is_active",
        "created_at",
        "updated_at",
        "dag_references",
        "latest_events",
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[Asset]:
        latest = AssetEvent.objects.filter(asset=OuterRef("pk")).order_by("-timestamp")
        return (
            super()
            .get_queryset(request)
            .annotate(latest_event_timestamp=Subquery(latest.values("timestamp")[:1]))
            .prefetch_related("aliases")
        )

    def get_readonly_fields(self, request: HttpRequest, obj: Asset | None = None) -> Any:
        # name and uri identify the asset (and are mirrored in asset_active): fixed once saved
        if obj is not None:
            return ("name", "uri", *self.readonly_fields)
        return self.readonly_fields

    @admin.display(boolean=True, description="active")
    def is_active(self, obj: Asset) -> bool:
        return hasattr(obj, "active")

    @admin.display(description="aliases")
    def alias_names(self, obj: Asset) -> str:
        return ", ".join(alias.name for alias in obj.aliases.all()) or EMPTY

    @admin.display(description="latest event", ordering="latest_event_timestamp")
    def latest_event_at(self, obj: Asset) -> Any:
        return obj.latest_event_timestamp or EMPTY

    @admin.display(description="declared by DAGs")
    def dag_references(self, obj: Asset) -> SafeString | str:
        rows = [
            *(
                ("schedules on it", ref.dag_id)
                for ref in DagScheduleAssetReference.objects.filter(asset=obj)
            ),
            *(
                ("produces it", f"{ref.dag_id}.{ref.task_id}")
                for ref in TaskOutletAssetReference.objects.filter(asset=obj)
            ),
            *(
                ("reads it", f"{ref.dag_id}.{ref.task_id}")
                for ref in TaskInletAssetReference.objects.filter(asset=obj)
            ),
        ]
        if not rows:
            return EMPTY
        # inline margin: the admin's "form .aligned ul" rule would indent it a second 160px
        return format_html(
            '<ul style="margin:0; padding:0">{}</ul>',
            format_html_join("", "<li>{}: {}</li>", rows),
        )

    @admin.display(description=f"latest {LATEST_EVENTS_SHOWN} events")
    def latest_events(self, obj: Asset) -> SafeString | str:
        events = list(
            AssetEvent.objects.filter(asset=obj).order_by("-timestamp", "-id")[:LATEST_EVENTS_SHOWN]
        )
        if not events:
            return EMPTY
        rows = format_html_join(
            "",
            '<tr><td><a href="{}">{}</a></td><td style="white-space:nowrap">{}</td>'
            "<td>{}</td><td>{}</td></tr>",
            (
                (
                    _change_url("assetevent", event.pk),
                    event.pk,
                    event.timestamp.isoformat(timespec="seconds"),
                    event.source_dag_id or "manual",
                    json.dumps(event.extra, sort_keys=True),
                )
                for event in events
            ),
        )
        return format_html(
            "<table><tr><th>event</th><th>timestamp</th><th>source DAG</th><th>extra</th></tr>"
            '{}</table><a href="{}">all events of this asset</a>',
            rows,
            _changelist_url("assetevent", asset__id__exact=obj.pk),
        )


class AliasAssetLinkInline(admin.TabularInline):
    model = AssetAliasAsset
    fk_name = "alias"
    extra = 0
    autocomplete_fields = ("asset",)
    verbose_name = "asset"
    verbose_name_plural = "assets this alias resolved to"


@admin.register(AssetAlias)
class AssetAliasAdmin(admin.ModelAdmin):
    list_display = ("name", "group", "asset_count")
    list_filter = ("group",)
    search_fields = ("name",)
    ordering = ("name",)
    inlines = (AliasAssetLinkInline,)

    def get_queryset(self, request: HttpRequest) -> QuerySet[AssetAlias]:
        links = (
            AssetAliasAsset.objects.filter(alias=OuterRef("pk"))
            .order_by()
            .values("alias")
            .annotate(n=Count("*"))
            .values("n")
        )
        return super().get_queryset(request).annotate(linked_assets=Subquery(links))

    @admin.display(description="assets", ordering="linked_assets")
    def asset_count(self, obj: AssetAlias) -> int:
        return obj.linked_assets or 0


@admin.register(AssetAliasAsset)
class AssetAliasAssetAdmin(admin.ModelAdmin):
    list_display = ("id", "alias", "asset_name", "asset_uri")
    list_select_related = ("alias", "asset")
    list_filter = (AliasFilter,)
    search_fields = ("alias__name", "asset__name", "asset__uri")
    autocomplete_fields = ("alias", "asset")
    ordering = ("alias__name", "asset__name", "asset__uri")

    @admin.display(description="asset", ordering="asset__name")
    def asset_name(self, obj: AssetAliasAsset) -> SafeString | str:
        return _asset_link(obj.asset, obj.asset_id)

    @admin.display(description="asset uri", ordering="asset__uri")
    def asset_uri(self, obj: AssetAliasAsset) -> str:
        return obj.asset.uri


# --- events ----------------------------------------------------------------------------------


class BigTableAdminMixin:
    """No COUNT(*) over the whole table (see ``CappedCountPaginator``)."""

    show_full_result_count = False
    paginator = CappedCountPaginator


@admin.register(AssetEvent)
class AssetEventAdmin(BigTableAdminMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = (
        "id",
        "timestamp",
        "asset_name",
        "asset_uri",
        "source_dag_id",
        "source_task_id",
        "source_run_id",
        "source_map_index",
        "partition_key",
        "source_alias_names",
        "consumer_runs",
    )
    list_select_related = ("asset",)
    list_filter = (
        ("timestamp", admin.DateFieldListFilter),
        SourceDagFilter,
        SourceAliasFilter,
        EventSourceFilter,
    )
    search_fields = ("asset__name", "asset__uri", "=source_dag_id", "=source_run_id")
    search_help_text = "Asset name or uri (contains), or an exact source DAG id or run id."
    ordering = ("-timestamp", "-id")
    fields = (
        "id",
        "timestamp",
        "asset_name",
        "asset_uri",
        "source_dag",
        "source_task_id",
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
            .prefetch_related("source_aliases", "created_dagruns")
        )

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[AssetEvent], search_term: str
    ) -> tuple[QuerySet[AssetEvent], bool]:
        """What ``search_fields`` would match, written so that indexes answer it.

        Every word must match: the asset's name or uri contains it (case-insensitive), or the
        source DAG id or run id equals it (case-insensitive, as the admin's ``=`` prefix).
        A LIKE over the joined asset of every event would scan the whole table; instead the
        (small) asset table is searched first, one query per word, and the events are
        filtered by ``asset_id IN (<ids>)``, with the exact arms comparing ``UPPER()`` the way
        ``iexact`` does on PostgreSQL. ``idx_asset_id_timestamp`` and the ``UPPER()``
        expression indexes then answer the OR with a bitmap scan. When very many assets
        match, their events are dense and the ids stay a subquery.
        """
        for bit in smart_split(search_term):
            if bit.startswith(('"', "'")) and bit[0] == bit[-1]:
                bit = unescape_string_literal(bit)
            assets = Asset.objects.filter(Q(name__icontains=bit) | Q(uri__icontains=bit))
            asset_ids: Any = list(
                assets.order_by("pk").values_list("pk", flat=True)[: SEARCH_MAX_ASSET_IDS + 1]
            )
            if len(asset_ids) > SEARCH_MAX_ASSET_IDS:
                asset_ids = assets.values("pk")
            queryset = queryset.filter(
                Q(asset_id__in=asset_ids)
                | Q(Exact(Upper("source_dag_id"), Upper(Value(bit))))
                | Q(Exact(Upper("source_run_id"), Upper(Value(bit))))
            )
        return queryset, False

    @admin.display(description="asset", ordering="asset__name")
    def asset_name(self, obj: AssetEvent) -> SafeString | str:
        return _asset_link(obj.asset, obj.asset_id)

    @admin.display(description="asset uri", ordering="asset__uri")
    def asset_uri(self, obj: AssetEvent) -> str:
        return obj.asset.uri if obj.asset is not None else EMPTY

    @admin.display(description="source aliases")
    def source_alias_names(self, obj: AssetEvent) -> SafeString | str:
        aliases = list(obj.source_aliases.all())
        if not aliases:
            return EMPTY
        return format_html_join(
            ", ",
            '<a href="{}">{}</a>',
            ((_change_url("assetalias", alias.pk), alias.name) for alias in aliases),
        )

    @admin.display(description="consumers (created DAG runs)")
    def consumer_runs(self, obj: AssetEvent) -> SafeString | str:
        runs = list(obj.created_dagruns.all())
        if not runs:
            return EMPTY
        return format_html_join(
            ", ",
            '<a href="{}">{} / {}</a>',
            ((_change_url("dagrun", run.pk), run.dag_id, run.run_id) for run in runs),
        )

    @admin.display(description="source DAG")
    def source_dag(self, obj: AssetEvent) -> SafeString | str:
        if obj.source_dag_id is None:
            return "manual (no task)"
        if not Dag.objects.filter(pk=obj.source_dag_id).exists():
            return obj.source_dag_id
        return format_html(
            '<a href="{}">{}</a>', _change_url("dag", obj.source_dag_id), obj.source_dag_id
        )

    @admin.display(description="source run")
    def source_run(self, obj: AssetEvent) -> SafeString | str:
        if obj.source_run_id is None:
            return EMPTY
        run = DagRun.objects.filter(dag_id=obj.source_dag_id, run_id=obj.source_run_id).first()
        if run is None:
            return obj.source_run_id
        return format_html('<a href="{}">{}</a>', _change_url("dagrun", run.pk), run.run_id)

    @admin.display(description="extra")
    def extra_pretty(self, obj: AssetEvent) -> SafeString:
        return _pretty_json(obj.extra)


@admin.register(AssetAliasAssetEvent)
class AssetAliasAssetEventAdmin(BigTableAdminMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("id", "alias", "event_link", "event_asset", "event_timestamp")
    list_select_related = ("alias", "event__asset")
    list_filter = (AliasFilter,)
    search_fields = ("alias__name", "event__asset__name", "event__asset__uri")
    ordering = ("-id",)
    fields = ("id", "alias", "event_link", "event_asset", "event_timestamp")
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[AssetAliasAssetEvent]:
        return super().get_queryset(request).select_related("alias", "event__asset")

    @admin.display(description="event")
    def event_link(self, obj: AssetAliasAssetEvent) -> SafeString:
        return format_html(
            '<a href="{}">event {}</a>', _change_url("assetevent", obj.event_id), obj.event_id
        )

    @admin.display(description="asset")
    def event_asset(self, obj: AssetAliasAssetEvent) -> SafeString | str:
        return _asset_link(obj.event.asset, obj.event.asset_id)

    @admin.display(description="timestamp", ordering="event__timestamp")
    def event_timestamp(self, obj: AssetAliasAssetEvent) -> Any:
        return obj.event.timestamp


# --- DAGs, runs, task instances, queue -------------------------------------------------------


class _DagReferenceInline(ReadOnlyTabularInline):
    def get_queryset(self, request: HttpRequest) -> QuerySet:
        related = [f.name for f in self.model._meta.fields if f.name in ("asset", "alias")]
        return super().get_queryset(request).select_related(*related)


class ScheduleAssetInline(_DagReferenceInline):
    model = DagScheduleAssetReference
    fields = ("asset", "created_at")
    verbose_name_plural = "schedule: assets"


class ScheduleAliasInline(_DagReferenceInline):
    model = DagScheduleAssetAliasReference
    fields = ("alias", "created_at")
    verbose_name_plural = "schedule: aliases"


class ScheduleNameRefInline(_DagReferenceInline):
    model = DagScheduleAssetNameReference
    fields = ("name", "created_at")
    verbose_name_plural = "schedule: asset name references"


class ScheduleUriRefInline(_DagReferenceInline):
    model = DagScheduleAssetUriReference
    fields = ("uri", "created_at")
    verbose_name_plural = "schedule: asset uri references"


class TaskOutletInline(_DagReferenceInline):
    model = TaskOutletAssetReference
    fields = ("task_id", "asset", "created_at")
    verbose_name_plural = "task outlets (assets)"


class TaskInletInline(_DagReferenceInline):
    model = TaskInletAssetReference
    fields = ("task_id", "asset", "created_at")
    verbose_name_plural = "task inlets (assets)"


class HasScheduleFilter(admin.SimpleListFilter):
    title = "asset schedule"
    parameter_name = "scheduled"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", "scheduled on assets"), ("no", "no asset schedule")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value() in ("yes", "no"):
            return queryset.filter(asset_expression__isnull=self.value() == "no")
        return queryset


@admin.register(Dag)
class DagAdmin(admin.ModelAdmin):
    list_display = (
        "dag_id",
        "is_paused",
        "is_stale",
        "schedule",
        "tasks",
        "queued_assets_count",
        "fileloc",
        "last_parsed_time",
    )
    list_filter = ("is_paused", "is_stale", HasScheduleFilter)
    search_fields = ("dag_id", "fileloc")
    ordering = ("dag_id",)
    actions = ("pause", "unpause")
    fields = (
        "dag_id",
        "is_paused",
        "is_stale",
        "fileloc",
        "last_parsed_time",
        "tasks",
        "schedule",
        "asset_expression_pretty",
        "runs",
    )
    readonly_fields = (
        "dag_id",
        "is_stale",
        "fileloc",
        "last_parsed_time",
        "tasks",
        "schedule",
        "asset_expression_pretty",
        "runs",
    )
    inlines = (
        ScheduleAssetInline,
        ScheduleAliasInline,
        ScheduleNameRefInline,
        ScheduleUriRefInline,
        TaskOutletInline,
        TaskInletInline,
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[Dag]:
        queued = (
            AssetDagRunQueue.objects.filter(target_dag=OuterRef("pk"))
            .order_by()
            .values("target_dag")
            .annotate(n=Count("*"))
            .values("n")
        )
        return super().get_queryset(request).annotate(queued_asset_total=Subquery(queued))

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # DAGs are declared by manifests (manage.py declare_dags)

    def has_delete_permission(self, request: HttpRequest, obj: Dag | None = None) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: Dag, form: Any, change: bool) -> None:
        dags_set_paused(dag_ids=[obj.dag_id], is_paused=obj.is_paused)

    @admin.display(description="schedule")
    def schedule(self, obj: Dag) -> str:
        if obj.asset_expression is None:
            return EMPTY
        try:
            return condition_summary(condition_parse(obj.asset_expression))
        except InvalidAssetExpression:
            return "invalid asset expression"

    @admin.display(description="tasks")
    def tasks(self, obj: Dag) -> str:
        return ", ".join(obj.task_ids) or EMPTY

    @admin.display(description="queued assets", ordering="queued_asset_total")
    def queued_assets_count(self, obj: Dag) -> int:
        return obj.queued_asset_total or 0

    @admin.display(description="asset expression")
    def asset_expression_pretty(self, obj: Dag) -> SafeString | str:
        return _pretty_json(obj.asset_expression) if obj.asset_expression else EMPTY

    @admin.display(description="runs")
    def runs(self, obj: Dag) -> SafeString:
        return format_html(
            '<a href="{}">runs of this DAG</a> · <a href="{}">its queued assets</a>',
            _changelist_url("dagrun", dag_id=obj.dag_id),
            _changelist_url("assetdagrunqueue", target_dag=obj.dag_id),
        )

    @admin.action(description="Pause selected DAGs", permissions=["change"])
    def pause(self, request: HttpRequest, queryset: QuerySet[Dag]) -> None:
        changed = dags_set_paused(dag_ids=queryset.values_list("pk", flat=True), is_paused=True)
        self.message_user(request, f"Paused {changed} DAG(s).", messages.SUCCESS)

    @admin.action(description="Unpause selected DAGs", permissions=["change"])
    def unpause(self, request: HttpRequest, queryset: QuerySet[Dag]) -> None:
        changed = dags_set_paused(dag_ids=queryset.values_list("pk", flat=True), is_paused=False)
        self.message_user(request, f"Unpaused {changed} DAG(s).", messages.SUCCESS)


class ConsumedEventInline(ReadOnlyTabularInline):
    model = DagRunAssetEvent
    fields = ("event_link", "asset", "timestamp", "source")
    readonly_fields = fields
    verbose_name = "consumed asset event"
    verbose_name_plural = "consumed asset events"

    def get_queryset(self, request: HttpRequest) -> QuerySet[DagRunAssetEvent]:
        return super().get_queryset(request).select_related("event__asset")

    @admin.display(description="event")
    def event_link(self, obj: DagRunAssetEvent) -> SafeString:
        return format_html(
            '<a href="{}">event {}</a>', _change_url("assetevent", obj.event_id), obj.event_id
        )

    @admin.display(description="asset")
    def asset(self, obj: DagRunAssetEvent) -> SafeString | str:
        return _asset_link(obj.event.asset, obj.event.asset_id)

    @admin.display(description="timestamp")
    def timestamp(self, obj: DagRunAssetEvent) -> Any:
        return obj.event.timestamp

    @admin.display(description="source")
    def source(self, obj: DagRunAssetEvent) -> str:
        event = obj.event
        if event.source_dag_id is None:
            return "manual"
        return f"{event.source_dag_id}.{event.source_task_id} @ {event.source_run_id}"


class RunTaskInstanceInline(ReadOnlyTabularInline):
    model = TaskInstance
    fields = ("task_id", "map_index", "state", "try_number", "start_date", "end_date")
    readonly_fields = fields
    show_change_link = True
    verbose_name_plural = "task instances"


@admin.register(DagRun)
class DagRunAdmin(BigTableAdminMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = (
        "run_id",
        "dag_link",
        "run_type",
        "state",
        "run_after",
        "logical_date",
        "start_date",
        "end_date",
        "consumed_events_count",
    )
    list_filter = (DagIdFilter, "run_type", "state", ("run_after", admin.DateFieldListFilter))
    search_fields = ("run_id", "=dag__dag_id")
    ordering = ("-run_after", "-id")
    readonly_fields = (
        "dag_link",
        "run_id",
        "run_type",
        "state",
        "logical_date",
        "data_interval_start",
        "data_interval_end",
        "run_after",
        "start_date",
        "end_date",
        "partition_key",
        "conf_pretty",
        "created_at",
    )
    fields = readonly_fields
    inlines = (ConsumedEventInline, RunTaskInstanceInline)

    def get_queryset(self, request: HttpRequest) -> QuerySet[DagRun]:
        consumed = (
            DagRunAssetEvent.objects.filter(dag_run=OuterRef("pk"))
            .order_by()
            .values("dag_run")
            .annotate(n=Count("*"))
            .values("n")
        )
        return super().get_queryset(request).annotate(consumed_event_total=Subquery(consumed))

    @admin.display(description="DAG", ordering="dag_id")
    def dag_link(self, obj: DagRun) -> SafeString:
        return format_html('<a href="{}">{}</a>', _change_url("dag", obj.dag_id), obj.dag_id)

    @admin.display(description="consumed events", ordering="consumed_event_total")
    def consumed_events_count(self, obj: DagRun) -> int:
        return obj.consumed_event_total or 0

    @admin.display(description="conf")
    def conf_pretty(self, obj: DagRun) -> SafeString:
        return _pretty_json(obj.conf)


@admin.register(TaskInstance)
class TaskInstanceAdmin(BigTableAdminMixin, ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = (
        "short_id",
        "dag_id",
        "task_id",
        "run_link",
        "map_index",
        "state",
        "try_number",
        "max_tries",
        "start_date",
        "end_date",
        "duration",
        "hostname",
    )
    list_filter = (DagIdFilter, "state", ("start_date", admin.DateFieldListFilter))
    search_fields = ("=dag_id", "task_id", "run_id")
    search_help_text = "Task instance id, exact DAG id, task id or run id (contains)."
    ordering = ("-updated_at",)
    readonly_fields = (
        "id",
        "dag_id",
        "task_id",
        "run_link",
        "map_index",
        "try_number",
        "max_tries",
        "state",
        "start_date",
        "end_date",
        "duration",
        "hostname",
        "unixname",
        "pid",
        "last_heartbeat_at",
        "rendered_map_index",
        "rendered_fields_pretty",
        "next_method",
        "next_kwargs",
        "trigger_classpath",
        "trigger_kwargs",
        "trigger_timeout",
        "reschedule_date",
        "task_reschedule_count",
        "updated_at",
    )
    fields = readonly_fields

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[TaskInstance], search_term: str
    ) -> tuple[QuerySet[TaskInstance], bool]:
        try:
            return queryset.filter(pk=uuid.UUID(search_term.strip())), False
        except ValueError:
            return super().get_search_results(request, queryset, search_term)

    @admin.display(description="id")
    def short_id(self, obj: TaskInstance) -> str:
        return str(obj.pk)[:8]

    @admin.display(description="run", ordering="run_id")
    def run_link(self, obj: TaskInstance) -> SafeString:
        return format_html('<a href="{}">{}</a>', _change_url("dagrun", obj.dag_run_id), obj.run_id)

    @admin.display(description="rendered fields")
    def rendered_fields_pretty(self, obj: TaskInstance) -> SafeString:
        return _pretty_json(obj.rendered_fields)


@admin.register(AssetDagRunQueue)
class AssetDagRunQueueAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("target_dag_link", "asset_name", "asset_uri", "created_at", "waiting_for")
    list_select_related = ("asset",)
    list_filter = (TargetDagFilter, ("created_at", admin.DateFieldListFilter))
    search_fields = ("=target_dag__dag_id", "asset__name", "asset__uri")
    ordering = ("created_at", "id")
    fields = ("target_dag_link", "asset_name", "asset_uri", "created_at", "waiting_for")
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[AssetDagRunQueue]:
        return super().get_queryset(request).select_related("asset")

    @admin.display(description="target DAG", ordering="target_dag_id")
    def target_dag_link(self, obj: AssetDagRunQueue) -> SafeString:
        return format_html(
            '<a href="{}">{}</a>', _change_url("dag", obj.target_dag_id), obj.target_dag_id
        )

    @admin.display(description="asset", ordering="asset__name")
    def asset_name(self, obj: AssetDagRunQueue) -> SafeString | str:
        return _asset_link(obj.asset, obj.asset_id)

    @admin.display(description="asset uri", ordering="asset__uri")
    def asset_uri(self, obj: AssetDagRunQueue) -> str:
        return obj.asset.uri

    @admin.display(description="waiting for", ordering="created_at")
    def waiting_for(self, obj: AssetDagRunQueue) -> str:
        return _duration(timezone.now() - obj.created_at)
