"""DAG runs and task instances (read-only, big tables)."""

from __future__ import annotations

import uuid
from typing import TypedDict

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone
from django.utils.safestring import SafeString
from django_stubs_ext import WithAnnotations

from assets_app.admin.common import (
    EMPTY,
    BigTableAdminMixin,
    LinkedEventColumnsMixin,
    ReadOnlyAdminMixin,
    ReadOnlyTabularInline,
    change_link,
    count_of,
    dag_link,
    duration,
    pretty_json,
    source_links,
    source_run_pk,
    task_link,
)
from assets_app.admin.filters import DagIdFilter
from assets_app.models import DagRun, DagRunAssetEvent, TaskInstance


class _ConsumedEvents(TypedDict):
    consumed_event_total: int | None


class ConsumedEventInline(LinkedEventColumnsMixin, ReadOnlyTabularInline[DagRunAssetEvent, DagRun]):
    model = DagRunAssetEvent
    fields = ("event_link", "event_asset", "event_timestamp", "source")
    readonly_fields = fields
    verbose_name = "consumed asset event"
    verbose_name_plural = "consumed asset events"

    def get_queryset(self, request: HttpRequest) -> QuerySet[DagRunAssetEvent]:
        return (
            super()
            .get_queryset(request)
            .select_related("event__asset")
            .annotate(source_run_pk=source_run_pk(event="event__"))
        )

    @admin.display(description="source")
    def source(self, obj: DagRunAssetEvent) -> SafeString | str:
        event = obj.event
        return source_links(
            event.source_dag_id,
            event.source_task_id,
            getattr(obj, "source_run_pk", None),
            event.source_run_id,
        )


class RunTaskInstanceInline(ReadOnlyTabularInline[TaskInstance, DagRun]):
    model = TaskInstance
    fields = ("task_id", "map_index", "state", "try_number", "start_date", "end_date")
    readonly_fields = fields
    show_change_link = True
    verbose_name_plural = "task instances"


@admin.register(DagRun)
class DagRunAdmin(BigTableAdminMixin, ReadOnlyAdminMixin, admin.ModelAdmin[DagRun]):
    list_display = (
        "run_id",
        "dag_link",
        "run_type",
        "state",
        "run_after",
        "start_date",
        "end_date",
        "run_duration",
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
        consumed = count_of(DagRunAssetEvent, pointing_at="dag_run")
        return super().get_queryset(request).annotate(consumed_event_total=consumed)

    @admin.display(description="DAG", ordering="dag_id")
    def dag_link(self, obj: DagRun) -> SafeString:
        return change_link("dag", obj.dag_id, obj.dag_id)

    @admin.display(description="duration")
    def run_duration(self, obj: DagRun) -> str:
        if obj.start_date is None:
            return EMPTY
        return duration((obj.end_date or timezone.now()) - obj.start_date)

    @admin.display(description="consumed events", ordering="consumed_event_total")
    def consumed_events_count(self, obj: WithAnnotations[DagRun, _ConsumedEvents]) -> int:
        return obj.consumed_event_total or 0

    @admin.display(description="conf")
    def conf_pretty(self, obj: DagRun) -> SafeString:
        return pretty_json(obj.conf)


@admin.register(TaskInstance)
class TaskInstanceAdmin(BigTableAdminMixin, ReadOnlyAdminMixin, admin.ModelAdmin[TaskInstance]):
    list_display = (
        "short_id",
        "dag_link",
        "task_link",
        "run_link",
        "map",
        "state",
        "tries",
        "start_date",
        "end_date",
        "duration",
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

    @admin.display(description="map", ordering="map_index")
    def map(self, obj: TaskInstance) -> int:
        return obj.map_index

    @admin.display(description="try", ordering="try_number")
    def tries(self, obj: TaskInstance) -> str:
        return f"{obj.try_number}/{obj.max_tries + 1}"

    @admin.display(description="DAG", ordering="dag_id")
    def dag_link(self, obj: TaskInstance) -> SafeString | str:
        return dag_link(obj.dag_id)

    @admin.display(description="task", ordering="task_id")
    def task_link(self, obj: TaskInstance) -> SafeString | str:
        return task_link(obj.dag_id, obj.task_id)

    @admin.display(description="run", ordering="run_id")
    def run_link(self, obj: TaskInstance) -> SafeString:
        return change_link("dagrun", obj.dag_run_id, obj.run_id)

    @admin.display(description="rendered fields")
    def rendered_fields_pretty(self, obj: TaskInstance) -> SafeString:
        return pretty_json(obj.rendered_fields)
