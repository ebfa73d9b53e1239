"""DAGs (declared by manifests; only the pause flag is editable) and the asset DAG-run queue."""

from __future__ import annotations

from typing import Any, TypedDict

from django.contrib import admin, messages
from django.db.models import Model, QuerySet
from django.http import HttpRequest
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django_stubs_ext import WithAnnotations

from assets_app.admin.common import (
    EMPTY,
    AssetColumnsMixin,
    ObjectAction,
    ObjectActionsAdmin,
    ReadOnlyAdminMixin,
    ReadOnlyTabularInline,
    change_link,
    change_url,
    changelist_url,
    count_of,
    duration,
    fact,
    ident,
    pretty_json,
    when,
)
from assets_app.admin.filters import DagTagFilter, HasScheduleFilter, TargetDagFilter
from assets_app.admin.panels import dag_panel
from assets_app.conditions import condition_parse, condition_summary
from assets_app.exceptions import AssetsError, InvalidAssetExpression
from assets_app.models import (
    AssetDagRunQueue,
    Dag,
    DagScheduleAssetAliasReference,
    DagScheduleAssetNameReference,
    DagScheduleAssetReference,
    DagScheduleAssetUriReference,
    TaskInletAssetReference,
    TaskOutletAssetReference,
)
from assets_app.selectors.dags import dag_schedule_description
from assets_app.services.audit import Actor
from assets_app.services.dags.declare import dags_set_paused
from assets_app.services.runs.dag_runs import dag_run_trigger


class _QueuedAssets(TypedDict):
    queued_asset_total: int | None


class DagReferenceInline(ReadOnlyTabularInline[Any, Dag]):
    """One of a DAG's reference tables (read-only), its asset or alias joined."""

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        related = [f.name for f in self.model._meta.fields if f.name in ("asset", "alias")]
        return super().get_queryset(request).select_related(*related)


def _reference_inline(
    reference: type[Model], columns: tuple[str, ...], title: str
) -> type[DagReferenceInline]:
    class Inline(DagReferenceInline):
        model = reference
        fields = (*columns, "created_at")
        verbose_name_plural = title

    Inline.__name__ = Inline.__qualname__ = f"{reference.__name__}Inline"
    return Inline


#: What the DAG page shows of the manifest's declarations, one inline per reference table.
DAG_REFERENCE_INLINES = (
    _reference_inline(DagScheduleAssetReference, ("asset",), "schedule: assets"),
    _reference_inline(DagScheduleAssetAliasReference, ("alias",), "schedule: aliases"),
    _reference_inline(DagScheduleAssetNameReference, ("name",), "schedule: asset name references"),
    _reference_inline(DagScheduleAssetUriReference, ("uri",), "schedule: asset uri references"),
    _reference_inline(TaskOutletAssetReference, ("task_id", "asset"), "task outlets (assets)"),
    _reference_inline(TaskInletAssetReference, ("task_id", "asset"), "task inlets (assets)"),
)


@admin.register(Dag)
class DagAdmin(ObjectActionsAdmin[Dag]):
    list_display = (
        "dag",
        "paused",
        "stale",
        "tag_list",
        "schedule",
        "next_run",
        "tasks",
        "queued_assets_count",
        "last_parsed",
    )
    list_display_links = ("dag",)
    list_filter = ("is_paused", "is_stale", HasScheduleFilter, DagTagFilter)
    search_fields = ("dag_id", "fileloc")
    ordering = ("dag_id",)
    actions = ("trigger", "pause", "unpause")
    object_actions = (
        ObjectAction("trigger", "Trigger a run", "change"),
        ObjectAction("pause", "Pause", "change"),
        ObjectAction("unpause", "Unpause", "change"),
    )
    fields = (
        "dag_id",
        "is_paused",
        "stale",
        "fileloc",
        "last_parsed",
        "tag_list",
        "tasks",
        "schedule",
        "next_run",
        "asset_expression_pretty",
        "runs",
    )
    # everything but the pause flag: the rest comes from the manifest
    readonly_fields = tuple(name for name in fields if name != "is_paused")
    inlines = DAG_REFERENCE_INLINES

    def get_inline_instances(self, request: HttpRequest, obj: Dag | None = None) -> list[Any]:
        # only the reference tables this DAG has rows in: no empty tables under its page
        inlines = super().get_inline_instances(request, obj)
        if obj is None:
            return inlines
        return [i for i in inlines if i.model._default_manager.filter(dag=obj).exists()]

    @admin.display(description="DAG", ordering="dag_id")
    def dag(self, obj: Dag) -> SafeString:
        return ident(obj.dag_id)

    @admin.display(description="paused", ordering="is_paused")
    def paused(self, obj: Dag) -> SafeString | str:
        # a fact, not an error: the scheduler creates no run for a paused DAG
        return fact("paused") if obj.is_paused else EMPTY

    @admin.display(description="stale", ordering="is_stale")
    def stale(self, obj: Dag) -> SafeString | str:
        # gone from its manifest: a fact about its declaration, not an error
        return fact("stale: no longer declared") if obj.is_stale else "no"

    @admin.display(description="last parsed", ordering="last_parsed_time")
    def last_parsed(self, obj: Dag) -> SafeString | str:
        return when(obj.last_parsed_time)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Dag]:
        queued = count_of(AssetDagRunQueue, pointing_at="target_dag")
        return super().get_queryset(request).annotate(queued_asset_total=queued)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # DAGs are declared by manifests (manage.py declare_dags)

    def has_delete_permission(self, request: HttpRequest, obj: Dag | None = None) -> bool:
        return False

    def panel_context(self, request: HttpRequest, obj: Dag) -> dict[str, Any]:
        return {"panel": dag_panel(obj)}  # the lineage and the recent runs

    def save_model(self, request: HttpRequest, obj: Dag, form: Any, change: bool) -> None:
        dags_set_paused(
            dag_ids=[obj.dag_id], is_paused=obj.is_paused, actor=Actor.of_request(request, "ui")
        )

    def object_actions_for(self, request: HttpRequest, obj: Dag) -> list[tuple[str, str]]:
        # a paused DAG offers "Unpause", an active one "Pause"
        hidden = "/do/pause/" if obj.is_paused else "/do/unpause/"
        return [
            (url, label)
            for url, label in super().object_actions_for(request, obj)
            if hidden not in url
        ]

    def do_trigger(self, request: HttpRequest, obj: Dag) -> None:
        self._trigger(request, Dag.objects.filter(pk=obj.pk))

    def do_pause(self, request: HttpRequest, obj: Dag) -> None:
        self._set_paused(request, Dag.objects.filter(pk=obj.pk), is_paused=True)

    def do_unpause(self, request: HttpRequest, obj: Dag) -> None:
        self._set_paused(request, Dag.objects.filter(pk=obj.pk), is_paused=False)

    @admin.display(description="schedule")
    def schedule(self, obj: Dag) -> SafeString | str:
        """The asset condition (``a & b``) and/or the time schedule as declared with its words
        (``@daily``, At 00:00), as Airflow's DAG list shows them."""
        parts = []
        if obj.asset_expression is not None:
            try:
                parts.append(condition_summary(condition_parse(obj.asset_expression)))
            except InvalidAssetExpression:
                parts.append("invalid asset expression")
        if obj.timetable:
            parts.append(obj.timetable_summary or "time schedule")
        if not parts:
            return EMPTY
        words = dag_schedule_description(obj) if obj.timetable else ""
        return format_html(
            "{}{}",
            " or ".join(parts),
            format_html("<br><small>{}</small>", words) if words else "",
        )

    @admin.display(description="next run", ordering="next_dagrun")
    def next_run(self, obj: Dag) -> SafeString | str:
        """The next time-scheduled run's logical date (Airflow's ``next_dagrun``); none while
        paused or for a DAG without a time schedule."""
        if not obj.timetable or obj.next_dagrun is None:
            return EMPTY
        return (
            when(obj.next_dagrun)
            if not obj.is_paused
            else format_html("{} <small>(paused)</small>", when(obj.next_dagrun))
        )

    @admin.display(description="tags")
    def tag_list(self, obj: Dag) -> SafeString | str:
        if not obj.tags:
            return EMPTY
        return format_html_join(" ", '<span class="ar-tag">{}</span>', ((t,) for t in obj.tags))

    @admin.display(description="tasks")
    def tasks(self, obj: Dag) -> SafeString | str:
        if not obj.task_ids:
            return EMPTY
        return format_html_join(", ", "{}", ((ident(task_id),) for task_id in obj.task_ids))

    @admin.display(description="queued assets", ordering="queued_asset_total")
    def queued_assets_count(self, obj: WithAnnotations[Dag, _QueuedAssets]) -> int:
        return obj.queued_asset_total or 0

    @admin.display(description="asset expression")
    def asset_expression_pretty(self, obj: Dag) -> SafeString | str:
        return pretty_json(obj.asset_expression) if obj.asset_expression else EMPTY

    @admin.display(description="runs")
    def runs(self, obj: Dag) -> SafeString:
        return format_html(
            '<a href="{}">runs of this DAG</a> · <a href="{}">its queued assets</a>'
            ' · <a href="{}">its audit log</a>',
            changelist_url("dagrun", dag_id=obj.dag_id),
            changelist_url("assetdagrunqueue", target_dag=obj.dag_id),
            changelist_url("eventlog", dag_id=obj.dag_id),
        )

    @admin.action(description="Trigger a run of each selected DAG", permissions=["change"])
    def trigger(self, request: HttpRequest, queryset: QuerySet[Dag]) -> None:
        self._trigger(request, queryset)

    def _trigger(self, request: HttpRequest, queryset: QuerySet[Dag]) -> None:
        """A manual run of each DAG (``dag_run_trigger``, as ``manage.py trigger_dag``), each
        recorded in its DAG's History; a DAG that cannot be triggered says why."""
        for dag in queryset.order_by("dag_id"):
            try:
                run = dag_run_trigger(
                    dag_id=dag.dag_id,
                    actor=Actor.of_request(request, "ui"),  # triggered_by and the user
                )
            except AssetsError as exc:
                self.message_user(request, f"{dag.dag_id} not triggered: {exc}", messages.ERROR)
                continue
            self.log_change(request, dag, f"Triggered run {run.run_id}")
            waits = " (it waits: the DAG is paused)" if dag.is_paused else ""
            self.message_user(
                request,
                format_html(
                    'Triggered {} run <a href="{}">{}</a>{}.',
                    dag.dag_id,
                    change_url("dagrun", run.pk),
                    run.run_id,
                    waits,
                ),
                messages.SUCCESS,
            )

    @admin.action(description="Pause selected DAGs", permissions=["change"])
    def pause(self, request: HttpRequest, queryset: QuerySet[Dag]) -> None:
        self._set_paused(request, queryset, is_paused=True)

    @admin.action(description="Unpause selected DAGs", permissions=["change"])
    def unpause(self, request: HttpRequest, queryset: QuerySet[Dag]) -> None:
        self._set_paused(request, queryset, is_paused=False)

    def _set_paused(
        self, request: HttpRequest, queryset: QuerySet[Dag], *, is_paused: bool
    ) -> None:
        dags = list(queryset.exclude(is_paused=is_paused).order_by("dag_id"))
        changed = dags_set_paused(
            dag_ids=[dag.dag_id for dag in dags],
            is_paused=is_paused,
            actor=Actor.of_request(request, "ui"),
        )
        verb = "Paused" if is_paused else "Unpaused"
        for dag in dags:
            self.log_change(request, dag, verb)
        self.message_user(request, f"{verb} {changed} DAG(s).", messages.SUCCESS)


@admin.register(AssetDagRunQueue)
class AssetDagRunQueueAdmin(
    AssetColumnsMixin, ReadOnlyAdminMixin, admin.ModelAdmin[AssetDagRunQueue]
):
    list_display = ("target_dag_link", "asset_name", "asset_uri", "queued_at", "waiting_for")
    date_hierarchy = "created_at"
    list_select_related = ("asset",)
    list_filter = (TargetDagFilter, ("created_at", admin.DateFieldListFilter))
    search_fields = ("=target_dag__dag_id", "asset__name", "asset__uri")
    ordering = ("created_at", "id")
    fields = ("target_dag_link", "asset_name", "asset_uri", "queued_at", "waiting_for")
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[AssetDagRunQueue]:
        return super().get_queryset(request).select_related("asset")

    @admin.display(description="target DAG", ordering="target_dag_id")
    def target_dag_link(self, obj: AssetDagRunQueue) -> SafeString:
        return change_link("dag", obj.target_dag_id, obj.target_dag_id)

    @admin.display(description="queued at", ordering="created_at")
    def queued_at(self, obj: AssetDagRunQueue) -> SafeString | str:
        return when(obj.created_at)

    @admin.display(description="waiting for", ordering="created_at")
    def waiting_for(self, obj: AssetDagRunQueue) -> SafeString | str:
        return duration(timezone.now() - obj.created_at)
