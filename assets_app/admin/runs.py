"""DAG runs and task instances (read-only, big tables), with the clear actions
(``assets_app.services.clearing``) and each task instance's earlier tries."""

from __future__ import annotations

import uuid
from typing import Any, TypedDict

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone
from django.utils.html import format_html, format_html_join
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
from assets_app.exceptions import AssetsError
from assets_app.models import (
    DAG_RUN_SUMMARY_FIELDS,
    FAILED_TI_STATES,
    DagRun,
    DagRunAssetEvent,
    TaskInstance,
    TaskInstanceHistory,
)
from assets_app.services.clearing import task_instances_clear

CLEAR_PERMISSION = "assets_app.change_taskinstance"


def _clear(
    modeladmin: admin.ModelAdmin[Any], request: HttpRequest, selected: QuerySet[TaskInstance]
) -> None:
    """Clear the selected task instances and say what happened (or why nothing did)."""
    try:
        result = task_instances_clear(task_instances=selected)
    except AssetsError as exc:
        modeladmin.message_user(request, f"Nothing cleared: {exc}", messages.ERROR)
        return
    if not result.cleared:
        modeladmin.message_user(
            request, "Nothing cleared: no finished task instance selected", messages.WARNING
        )
        return
    tries = ", ".join(f"{c.label} (try {c.try_number})" for c in result.cleared[:10])
    more = f" and {len(result.cleared) - 10} more" if len(result.cleared) > 10 else ""
    modeladmin.message_user(
        request,
        f"Cleared {len(result.cleared)} task instance(s), scheduled as new tries: {tries}{more}; "
        f"{len(result.runs_requeued)} run(s) back to queued; "
        f"{len(result.left_alone)} unfinished task instance(s) left alone.",
        messages.SUCCESS,
    )


class _ClearPermissionMixin:
    def has_clear_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(CLEAR_PERMISSION)


class _DagColumnMixin:
    """The ``dag_link`` column of a run or a task instance."""

    @admin.display(description="DAG", ordering="dag_id")
    def dag_link(self, obj: DagRun | TaskInstance) -> SafeString | str:
        return dag_link(obj.dag_id)


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
    fields = (
        "task_id",
        "map_index",
        "state",
        "try_number",
        "start_date",
        "end_date",
        "failure_reason",
    )
    readonly_fields = fields
    show_change_link = True
    verbose_name_plural = "task instances"


@admin.register(DagRun)
class DagRunAdmin(
    _ClearPermissionMixin,
    _DagColumnMixin,
    BigTableAdminMixin,
    ReadOnlyAdminMixin,
    admin.ModelAdmin[DagRun],
):
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
        *DAG_RUN_SUMMARY_FIELDS,
        "partition_key",
        "conf_pretty",
        "created_at",
    )
    fields = readonly_fields
    inlines = (ConsumedEventInline, RunTaskInstanceInline)
    actions = ("clear_runs", "clear_failed_of_runs")

    @admin.action(description="Clear: run all their task instances again", permissions=["clear"])
    def clear_runs(self, request: HttpRequest, queryset: QuerySet[DagRun]) -> None:
        _clear(self, request, TaskInstance.objects.filter(dag_run__in=queryset))

    @admin.action(
        description="Clear failed: run their failed task instances again", permissions=["clear"]
    )
    def clear_failed_of_runs(self, request: HttpRequest, queryset: QuerySet[DagRun]) -> None:
        _clear(
            self,
            request,
            TaskInstance.objects.filter(dag_run__in=queryset, state__in=FAILED_TI_STATES),
        )

    def get_queryset(self, request: HttpRequest) -> QuerySet[DagRun]:
        consumed = count_of(DagRunAssetEvent, pointing_at="dag_run")
        return super().get_queryset(request).annotate(consumed_event_total=consumed)

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
class TaskInstanceAdmin(
    _ClearPermissionMixin,
    _DagColumnMixin,
    BigTableAdminMixin,
    ReadOnlyAdminMixin,
    admin.ModelAdmin[TaskInstance],
):
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
        "failure_reason",
        "next_retry_at",
        "start_date",
        "end_date",
        "duration",
        "hostname",
        "unixname",
        "pid",
        "last_heartbeat_at",
        "earlier_tries",
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
    actions = ("clear_task_instances",)

    @admin.action(description="Clear: run again as a new try", permissions=["clear"])
    def clear_task_instances(self, request: HttpRequest, queryset: QuerySet[TaskInstance]) -> None:
        _clear(self, request, queryset)

    @admin.display(description="earlier tries")
    def earlier_tries(self, obj: TaskInstance) -> SafeString | str:
        tries = TaskInstanceHistory.objects.filter(
            dag_id=obj.dag_id, run_id=obj.run_id, task_id=obj.task_id, map_index=obj.map_index
        ).order_by("-try_number")
        rows = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            (
                (
                    t.try_number,
                    t.state,
                    t.start_date or "-",
                    t.end_date or "-",
                    t.hostname or "-",
                    t.failure_reason or "-",
                    t.task_instance_id,
                )
                for t in tries
            ),
        )
        if not rows:
            return "none"
        return format_html(
            "<table><thead><tr><th>try</th><th>state</th><th>start</th><th>end</th>"
            "<th>host</th><th>failure reason</th><th>id of that try</th></tr></thead>"
            "<tbody>{}</tbody></table>",
            rows,
        )

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

    @admin.display(description="task", ordering="task_id")
    def task_link(self, obj: TaskInstance) -> SafeString | str:
        return task_link(obj.dag_id, obj.task_id)

    @admin.display(description="run", ordering="run_id")
    def run_link(self, obj: TaskInstance) -> SafeString:
        return change_link("dagrun", obj.dag_run_id, obj.run_id)

    @admin.display(description="rendered fields")
    def rendered_fields_pretty(self, obj: TaskInstance) -> SafeString:
        return pretty_json(obj.rendered_fields)
