"""DAG runs and task instances (read-only, big tables), with the clear actions
(``assets_app.services.runs.clearing``), each task instance's earlier tries and its log
(``assets_app.admin.logs``)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any, TypedDict

from django.contrib import admin, messages
from django.db.models import Case, IntegerField, Model, QuerySet, Value, When
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django_stubs_ext import WithAnnotations

from assets_app.admin.common import (
    EMPTY,
    BigTableAdminMixin,
    LinkedEventColumnsMixin,
    ObjectAction,
    ObjectActionsAdmin,
    ReadOnlyAdminMixin,
    ReadOnlyTabularInline,
    change_link,
    count_of,
    dag_link,
    duration,
    ident,
    pretty_json,
    source_links,
    source_run_pk,
    state_badge,
    when,
)
from assets_app.admin.filters import DagIdFilter, TaskInstanceDagFilter
from assets_app.admin.logs import TaskLogAdminMixin
from assets_app.admin.panels import run_panel, task_ids_in_graph_order
from assets_app.exceptions import AssetsError
from assets_app.models import (
    DAG_RUN_SUMMARY_FIELDS,
    FAILED_TI_STATES,
    Dag,
    DagCallbackRequest,
    DagRun,
    DagRunAssetEvent,
    DagRunState,
    TaskInstance,
    TaskInstanceHistory,
    TaskInstanceState,
)
from assets_app.selectors.runs import (
    NO_TRIGGERER_ALIVE,
    task_instance_waiting_reason,
    triggerer_alive,
)
from assets_app.services.audit import Actor
from assets_app.services.runs.clearing import task_instances_clear
from assets_app.services.runs.marking import dag_run_mark, task_instances_mark
from assets_app.services.runs.past import task_instance_past_wait

CLEAR_PERMISSION = "assets_app.change_taskinstance"
#: Marking a run success or failed (as ``PATCH /api/v2/dags/{id}/dagRuns/{run}``).
MARK_PERMISSION = "assets_app.change_dagrun"

#: The run page shows each summary field (``DAG_RUN_SUMMARY_FIELDS``) as the lists do: a
#: timestamp in the one format, the state as a badge.
RUN_PAGE_FIELDS = {
    "run_id": "run",
    "state": "state_badge",
    "logical_date": "logical",
    "data_interval_start": "interval_start",
    "data_interval_end": "interval_end",
    "run_after": "after",
    "start_date": "started",
    "end_date": "ended",
}


def _clear(
    modeladmin: admin.ModelAdmin[Any],
    request: HttpRequest,
    selected: QuerySet[TaskInstance],
    *,
    history: Iterable[Model] | None = None,
) -> list[TaskInstance]:
    """Clear the selected task instances and say what happened (or why nothing did); returns
    the new tries. What was cleared is recorded in the History of each of ``history`` (the
    runs the operator picked), or else of each new try (a cleared task instance is a new row:
    its History starts with how it came to be)."""
    try:
        result = task_instances_clear(
            task_instances=selected, actor=Actor.of_request(request, "ui")
        )
    except AssetsError as exc:
        modeladmin.message_user(request, f"Nothing cleared: {exc}", messages.ERROR)
        return []
    if not result.cleared:
        modeladmin.message_user(
            request, "Nothing cleared: no finished task instance selected", messages.WARNING
        )
        return []
    new_tries = list(
        TaskInstance.objects.filter(pk__in=[c.task_instance_id for c in result.cleared])
    )
    if history is None:
        for ti in new_tries:
            modeladmin.log_change(request, ti, f"Cleared: try {ti.try_number} scheduled")
    else:
        for obj in history:
            modeladmin.log_change(
                request, obj, f"Cleared {len(result.cleared)} task instance(s) as new tries"
            )
    tries = ", ".join(f"{c.label} (try {c.try_number})" for c in result.cleared[:10])
    more = f" and {len(result.cleared) - 10} more" if len(result.cleared) > 10 else ""
    modeladmin.message_user(
        request,
        f"Cleared {len(result.cleared)} task instance(s), scheduled as new tries: {tries}{more}; "
        f"{len(result.runs_requeued)} run(s) back to queued; "
        f"{len(result.left_alone)} unfinished task instance(s) left alone.",
        messages.SUCCESS,
    )
    return new_tries


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


class _TryColumnsMixin:
    """A task instance's state, dates and duration as every page shows them."""

    @admin.display(description="state", ordering="state")
    def state_badge(self, obj: TaskInstance) -> SafeString | str:
        return state_badge(obj.state)

    @admin.display(description="started", ordering="start_date")
    def started(self, obj: TaskInstance) -> SafeString | str:
        return when(obj.start_date)

    @admin.display(description="ended", ordering="end_date")
    def ended(self, obj: TaskInstance) -> SafeString | str:
        return when(obj.end_date)

    @admin.display(description="duration", ordering="duration")
    def took(self, obj: TaskInstance) -> SafeString | str:
        if obj.duration is not None:
            return duration(obj.duration)
        if obj.start_date is not None and obj.state == "running":
            return duration(timezone.now() - obj.start_date)
        return EMPTY


class RunTaskInstanceInline(_TryColumnsMixin, ReadOnlyTabularInline[TaskInstance, DagRun]):
    model = TaskInstance
    fields = (
        "task",
        "map_index",
        "state_badge",
        "try_number",
        "started",
        "ended",
        "took",
        "failure_reason",
    )
    readonly_fields = fields
    show_change_link = True
    verbose_name_plural = "task instances"

    def get_queryset(self, request: HttpRequest) -> QuerySet[TaskInstance]:
        """The run's task instances in its DAG's graph order (each after its upstream tasks,
        as Airflow's grid lists them), mapped ones by index."""
        rows = super().get_queryset(request)
        match = request.resolver_match
        run_pk = str(match.kwargs.get("object_id", "")) if match is not None else ""
        dag = Dag.objects.filter(runs__pk=int(run_pk)).first() if run_pk.isdigit() else None
        if dag is None:
            return rows
        order = task_ids_in_graph_order(dag)
        if not order:  # no declared tasks (a CASE of no WHEN would be ORDER BY a constant)
            return rows
        position = Case(
            *(When(task_id=task_id, then=Value(n)) for n, task_id in enumerate(order)),
            default=Value(len(order)),
            output_field=IntegerField(),
        )
        return rows.order_by(position, "task_id", "map_index")

    @admin.display(description="task")
    def task(self, obj: TaskInstance) -> SafeString:
        return ident(obj.task_id)


@admin.register(DagRun)
class DagRunAdmin(
    _ClearPermissionMixin,
    _DagColumnMixin,
    BigTableAdminMixin,
    ReadOnlyAdminMixin,
    ObjectActionsAdmin[DagRun],
):
    # at 1400 px: the run id and the DAG (two lines at most) get the width; the start and the
    # end are on the run's page (the end is the start plus the duration)
    list_display = (
        "run",
        "dag_link",
        "kind",
        "state_badge",
        "after",
        "run_duration",
        "consumed_events_count",
    )
    list_display_links = ("run",)
    list_filter = (DagIdFilter, "run_type", "state", ("run_after", admin.DateFieldListFilter))
    search_fields = ("run_id", "=dag__dag_id")
    ordering = ("-run_after", "-id")
    readonly_fields = (
        "dag_link",
        *(RUN_PAGE_FIELDS.get(name, name) for name in DAG_RUN_SUMMARY_FIELDS),
        "run_duration",
        "partition_key",
        "conf_pretty",
        "triggered",
        "created_on",
    )
    fields = readonly_fields
    inlines = (ConsumedEventInline, RunTaskInstanceInline)

    def get_inline_instances(self, request: HttpRequest, obj: DagRun | None = None) -> list[Any]:
        # no empty table: a run that consumed no event shows no consumed-events inline
        inlines = super().get_inline_instances(request, obj)
        if obj is None:
            return inlines
        return [
            inline
            for inline in inlines
            if not isinstance(inline, ConsumedEventInline)
            or DagRunAssetEvent.objects.filter(dag_run=obj).exists()
        ]

    @admin.display(description="run id", ordering="run_id")
    def run(self, obj: DagRun) -> SafeString:
        return ident(obj.run_id)

    @admin.display(description="type", ordering="run_type")
    def kind(self, obj: DagRun) -> SafeString:
        return ident(obj.run_type)

    @admin.display(description="state", ordering="state")
    def state_badge(self, obj: DagRun) -> SafeString | str:
        return state_badge(obj.state)

    @admin.display(description="run after", ordering="run_after")
    def after(self, obj: DagRun) -> SafeString | str:
        return when(obj.run_after)

    @admin.display(description="started", ordering="start_date")
    def started(self, obj: DagRun) -> SafeString | str:
        return when(obj.start_date)

    @admin.display(description="ended", ordering="end_date")
    def ended(self, obj: DagRun) -> SafeString | str:
        return when(obj.end_date)

    @admin.display(description="logical date", ordering="logical_date")
    def logical(self, obj: DagRun) -> SafeString | str:
        return when(obj.logical_date)

    @admin.display(description="data interval start")
    def interval_start(self, obj: DagRun) -> SafeString | str:
        return when(obj.data_interval_start)

    @admin.display(description="data interval end")
    def interval_end(self, obj: DagRun) -> SafeString | str:
        return when(obj.data_interval_end)

    @admin.display(description="triggered by")
    def triggered(self, obj: DagRun) -> SafeString | str:
        """The face that made the run and, for a person's trigger, who (Airflow 3's
        ``triggered_by`` and ``triggering_user_name``)."""
        if not obj.triggered_by:
            return EMPTY
        face = obj.get_triggered_by_display()
        if obj.triggering_user_name:
            return format_html("{} ({})", face, obj.triggering_user_name)
        return face

    @admin.display(description="created at")
    def created_on(self, obj: DagRun) -> SafeString | str:
        return when(obj.created_at)

    actions = ("clear_runs", "clear_failed_of_runs")
    object_actions = (
        ObjectAction("clear", "Clear: run all its task instances again", "clear"),
        ObjectAction("clear_failed", "Clear failed task instances", "clear"),
        ObjectAction("mark_success", "Mark success", "mark"),
        ObjectAction("mark_failed", "Mark failed", "mark"),
    )

    def has_mark_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(MARK_PERMISSION)

    def do_mark_success(self, request: HttpRequest, obj: DagRun) -> None:
        self._mark(request, obj, DagRunState.SUCCESS)

    def do_mark_failed(self, request: HttpRequest, obj: DagRun) -> None:
        self._mark(request, obj, DagRunState.FAILED)

    def _mark(self, request: HttpRequest, obj: DagRun, state: str) -> None:
        """Airflow's "mark success/failed" through ``services.marking``; in the History."""
        try:
            result = dag_run_mark(
                dag_id=obj.dag_id,
                run_id=obj.run_id,
                state=state,
                user_id=request.user.get_username(),
                actor=Actor.of_request(request, "ui"),
            )
        except AssetsError as exc:
            self.message_user(request, str(exc), messages.ERROR)
            return
        changed = len(result.task_instances)
        self.log_change(request, obj, f"Marked {state}; {changed} task instance(s) changed")
        self.message_user(
            request,
            f"Marked {obj} {state}; {changed} unfinished task instance(s) changed.",
            messages.SUCCESS,
        )

    @admin.action(description="Clear: run all their task instances again", permissions=["clear"])
    def clear_runs(self, request: HttpRequest, queryset: QuerySet[DagRun]) -> None:
        _clear(
            self,
            request,
            TaskInstance.objects.filter(dag_run__in=queryset),
            history=list(queryset),
        )

    @admin.action(
        description="Clear failed: run their failed task instances again", permissions=["clear"]
    )
    def clear_failed_of_runs(self, request: HttpRequest, queryset: QuerySet[DagRun]) -> None:
        _clear(
            self,
            request,
            TaskInstance.objects.filter(dag_run__in=queryset, state__in=FAILED_TI_STATES),
            history=list(queryset),
        )

    def do_clear(self, request: HttpRequest, obj: DagRun) -> None:
        self.clear_runs(request, DagRun.objects.filter(pk=obj.pk))

    def do_clear_failed(self, request: HttpRequest, obj: DagRun) -> None:
        self.clear_failed_of_runs(request, DagRun.objects.filter(pk=obj.pk))

    def panel_context(self, request: HttpRequest, obj: DagRun) -> dict[str, Any]:
        return {"run_panel": run_panel(obj)}  # the task graph in the run's states, the Gantt

    def get_queryset(self, request: HttpRequest) -> QuerySet[DagRun]:
        consumed = count_of(DagRunAssetEvent, pointing_at="dag_run")
        return super().get_queryset(request).annotate(consumed_event_total=consumed)

    @admin.display(description="duration")
    def run_duration(self, obj: DagRun) -> SafeString | str:
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
    TaskLogAdminMixin,
    _TryColumnsMixin,
    _ClearPermissionMixin,
    _DagColumnMixin,
    BigTableAdminMixin,
    ReadOnlyAdminMixin,
    ObjectActionsAdmin[TaskInstance],
):
    # at 1400 px: the task (its map index in brackets) opens the task instance's page
    list_display = (
        "task_page_link",
        "dag_link",
        "run_link",
        "state_badge",
        "tries",
        "started",
        "took",
    )
    list_display_links = ("task_page_link",)
    list_filter = (TaskInstanceDagFilter, "state", ("start_date", admin.DateFieldListFilter))
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
        "state_badge",
        "waiting_for",
        "pool",
        "pool_slots",
        "priority_weight",
        "failure_reason",
        "next_retry",
        "started",
        "ended",
        "took",
        "hostname",
        "unixname",
        "pid",
        "last_heartbeat",
        "earlier_tries",
        "rendered_map_index",
        "rendered_fields_pretty",
        "next_method",
        "next_kwargs",
        "trigger_classpath",
        "trigger_kwargs",
        "trigger_timeout_at",
        "reschedule_at",
        "task_reschedule_count",
        "updated",
    )
    fields = readonly_fields
    actions = ("clear_task_instances", "mark_task_instances_success", "mark_task_instances_failed")
    object_actions = (
        ObjectAction("clear", "Clear: run again as a new try", "clear"),
        ObjectAction("mark_success", "Mark success", "clear"),
        ObjectAction("mark_failed", "Mark failed", "clear"),
    )

    @admin.action(description="Clear: run again as a new try", permissions=["clear"])
    def clear_task_instances(self, request: HttpRequest, queryset: QuerySet[TaskInstance]) -> None:
        _clear(self, request, queryset)

    @admin.action(description="Mark success", permissions=["clear"])
    def mark_task_instances_success(
        self, request: HttpRequest, queryset: QuerySet[TaskInstance]
    ) -> None:
        self._mark(request, queryset, TaskInstanceState.SUCCESS)

    @admin.action(description="Mark failed", permissions=["clear"])
    def mark_task_instances_failed(
        self, request: HttpRequest, queryset: QuerySet[TaskInstance]
    ) -> None:
        self._mark(request, queryset, TaskInstanceState.FAILED)

    def do_mark_success(self, request: HttpRequest, obj: TaskInstance) -> None:
        self._mark(request, TaskInstance.objects.filter(pk=obj.pk), TaskInstanceState.SUCCESS)

    def do_mark_failed(self, request: HttpRequest, obj: TaskInstance) -> None:
        self._mark(request, TaskInstance.objects.filter(pk=obj.pk), TaskInstanceState.FAILED)

    def _mark(self, request: HttpRequest, selected: QuerySet[TaskInstance], state: str) -> None:
        """Airflow's "mark success/failed" of task instances (``services.runs.marking``): the
        failed ones downstream run again; in each one's History."""
        try:
            result = task_instances_mark(
                task_instances=selected, state=state, actor=Actor.of_request(request, "ui")
            )
        except AssetsError as exc:
            self.message_user(request, f"Nothing marked: {exc}", messages.ERROR)
            return
        if not result.marked:
            self.message_user(request, f"Nothing marked: already {state}", messages.WARNING)
            return
        for ti in selected.filter(state=state):
            self.log_change(request, ti, f"Marked {state}")
        cleared = f"; cleared downstream: {', '.join(result.cleared)}" if result.cleared else ""
        self.message_user(
            request,
            f"Marked {state}: {', '.join(m.label for m in result.marked)}{cleared}",
            messages.SUCCESS,
        )

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        """The list, warning when deferred task instances wait and no triggerer is alive
        (docs/triggerer.md): nothing runs their triggers (2 queries, only on a GET)."""
        if request.method == "GET" and not triggerer_alive():
            deferred = TaskInstance.objects.filter(state=TaskInstanceState.DEFERRED).count()
            if deferred:
                self.message_user(
                    request,
                    f"{deferred} task instance(s) deferred, and {NO_TRIGGERER_ALIVE}",
                    messages.WARNING,
                )
        return super().changelist_view(request, extra_context)

    def do_clear(self, request: HttpRequest, obj: TaskInstance) -> TaskInstance | None:
        # the new try is a new row: its page is where the operator goes next
        new_tries = _clear(self, request, TaskInstance.objects.filter(pk=obj.pk))
        return new_tries[0] if new_tries else None

    def panel_context(self, request: HttpRequest, obj: TaskInstance) -> dict[str, Any]:
        return {"log_panel": self.log_panel(request, obj)}  # the log of a try, live

    @admin.display(description="waiting for")
    def waiting_for(self, obj: TaskInstance) -> str:
        """Why a task instance waits: without a state, for the past (depends_on_past);
        scheduled, for its pool (missing, or too few open slots)."""
        return task_instance_past_wait(obj) or task_instance_waiting_reason(obj) or EMPTY

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
                    state_badge(t.state),
                    when(t.start_date),
                    when(t.end_date),
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

    @admin.display(description="next retry at")
    def next_retry(self, obj: TaskInstance) -> SafeString | str:
        return when(obj.next_retry_at)

    @admin.display(description="last heartbeat at")
    def last_heartbeat(self, obj: TaskInstance) -> SafeString | str:
        return when(obj.last_heartbeat_at)

    @admin.display(description="trigger timeout")
    def trigger_timeout_at(self, obj: TaskInstance) -> SafeString | str:
        return when(obj.trigger_timeout)

    @admin.display(description="reschedule date")
    def reschedule_at(self, obj: TaskInstance) -> SafeString | str:
        return when(obj.reschedule_date)

    @admin.display(description="updated at")
    def updated(self, obj: TaskInstance) -> SafeString | str:
        return when(obj.updated_at)

    @admin.display(description="try", ordering="try_number")
    def tries(self, obj: TaskInstance) -> str:
        return f"{obj.try_number}/{obj.max_tries + 1}"

    @admin.display(description="task [map index]", ordering="task_id")
    def task_page_link(self, obj: TaskInstance) -> SafeString:
        # the changelist links it to the instance's page; a mapped one reads as Airflow writes
        # it: ``task_id [2]``
        if obj.map_index < 0:
            return ident(obj.task_id)
        if obj.rendered_map_index:  # its map_index_template's label
            return format_html(
                '{} <span class="ar-nowrap">[{}]</span> {}',
                ident(obj.task_id),
                obj.map_index,
                obj.rendered_map_index,
            )
        return format_html(
            '{} <span class="ar-nowrap">[{}]</span>', ident(obj.task_id), obj.map_index
        )

    @admin.display(description="run", ordering="run_id")
    def run_link(self, obj: TaskInstance) -> SafeString:
        return change_link("dagrun", obj.dag_run_id, obj.run_id)

    @admin.display(description="rendered fields")
    def rendered_fields_pretty(self, obj: TaskInstance) -> SafeString:
        return pretty_json(obj.rendered_fields)


@admin.register(DagCallbackRequest)
class DagCallbackRequestAdmin(
    _DagColumnMixin, ReadOnlyAdminMixin, admin.ModelAdmin[DagCallbackRequest]
):
    """The callbacks runs asked for (a DAG's; a task's whose try ended outside its process) and
    how each went (the DAG processor runs them, ``runtime.dag_callbacks``), read-only."""

    list_display = (
        "__str__",
        "dag_link",
        "run_link",
        "task_id",
        "kind",
        "reason",
        "state",
        "created_at",
    )
    list_select_related = ("dag_run",)
    list_filter = ("state", "kind")
    search_fields = ("=dag_id", "dag_run__run_id", "=task_id")
    ordering = ("-created_at", "-id")
    fields = (
        "dag_id",
        "run_link",
        "task_id",
        "map_index",
        "try_number",
        "kind",
        "reason",
        "state",
        "created_at",
        "started_at",
        "ended_at",
        "output",
    )
    readonly_fields = fields

    @admin.display(description="run")
    def run_link(self, obj: DagCallbackRequest) -> SafeString:
        return change_link("dagrun", obj.dag_run_id, obj.dag_run.run_id)

    @admin.display(description="error")
    def output(self, obj: DagCallbackRequest) -> SafeString | str:
        if not obj.error:
            return EMPTY
        return format_html('<pre style="white-space: pre-wrap">{}</pre>', obj.error)
