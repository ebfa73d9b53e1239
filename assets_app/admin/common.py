"""What every admin area shares: links, pretty JSON, durations, read-only and big-table mixins."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, ClassVar, TypeVar
from urllib.parse import urlencode

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Model, OuterRef, Subquery
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseNotAllowed,
    HttpResponseRedirect,
)
from django.urls import URLPattern, path, reverse
from django.utils.html import escape, format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from assets_app.formats import duration_human, timestamp_human
from assets_app.models import (
    Asset,
    AssetAliasAsset,
    AssetAliasAssetEvent,
    AssetDagRunQueue,
    AssetEvent,
    DagRun,
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


#: Where a long id may wrap: after a run of ``_``, after ``/`` or ``://``, after a ``.`` not
#: followed by a digit, and after a ``-`` between two non-digits. So a timestamp in a run id is
#: one unbreakable part: ``asset_triggered__2026-12-01T19:25:28.244731+00:00_AbC12xYz`` may
#: wrap after ``__`` and before its suffix, never inside its date-time, a word or a number.
_ID_BREAK = re.compile(r"(_+|:?/+|\.(?=\D)|(?<=\D)-(?=\D))")


#: Ids up to this long wrap at one place at most (two lines); longer ones wherever they may.
IDENT_TWO_LINES_MAX = 80


def ident_parts(value: Any, *, two_lines: bool = True) -> list[str]:
    """``value`` as the parts it is shown in, each never broken inside: one part, or two cut
    at the place (``_ID_BREAK``) nearest its middle, so that the id takes two lines at most and
    its longer line is as short as it can be. An id longer than ``IDENT_TWO_LINES_MAX`` is cut
    at every place it may wrap, and so is every id when not ``two_lines`` (a narrow sidebar).
    The parts join back to ``value``."""
    text = str(value)
    pieces = _ID_BREAK.split(text)
    # split() alternates text and separators: each part is a text and the separator after it
    parts = [p for p in ("".join(pieces[i : i + 2]) for i in range(0, len(pieces), 2)) if p]
    if not two_lines or len(parts) <= 2 or len(text) > IDENT_TWO_LINES_MAX:
        return parts
    cuts = [sum(len(part) for part in parts[:i]) for i in range(1, len(parts))]
    cut = min(cuts, key=lambda at: max(at, len(text) - at))
    return [text[:cut], text[cut:]]


def ident(value: Any, *, two_lines: bool = True) -> SafeString:
    """An id (DAG, task, run, asset, alias) that wraps only between its parts: each part
    (``ident_parts``) a ``<span class="ar-idp">`` that never breaks, a ``<wbr>`` between them,
    all in a ``<span class="ar-id">``."""
    html = "<wbr>".join(
        f'<span class="ar-idp">{escape(part)}</span>'
        for part in ident_parts(value, two_lines=two_lines)
    )
    # every part is escaped above; only the spans and the <wbr> breaks are markup
    css = "ar-id" if two_lines else "ar-id ar-id-any"  # any: as many lines as it needs
    return format_html('<span class="{}">{}</span>', css, mark_safe(html))  # noqa: S308


def change_link(model_name: str, pk: Any, text: Any) -> SafeString:
    """A link to the change page of one row, its text an ``ident``."""
    return format_html('<a href="{}">{}</a>', change_url(model_name, pk), ident(text))


def link_list(links: Iterable[tuple[str, Any]]) -> SafeString | str:
    """Comma-separated links from ``(url, text)`` pairs (``EMPTY`` when there are none)."""
    pairs = list(links)
    if not pairs:
        return EMPTY
    return format_html_join(", ", '<a href="{}">{}</a>', ((url, ident(t)) for url, t in pairs))


def dag_link(dag_id: str | None) -> SafeString | str:
    """A link to a DAG's page (``EMPTY`` without one)."""
    if not dag_id:
        return EMPTY
    return change_link("dag", dag_id, dag_id)


def task_link(dag_id: str | None, task_id: str | None) -> SafeString | str:
    """A task is no row of its own: the link lists its task instances."""
    if not dag_id or not task_id:
        return EMPTY
    return format_html(
        '<a href="{}">{}</a>',
        changelist_url("taskinstance", dag_id=dag_id, task_id=task_id),
        ident(task_id),
    )


def run_link(run_pk: int | None, run_id: str | None) -> SafeString | str:
    """A link to a DAG run's page; the bare run id when the run is not (or no longer) known."""
    if not run_id:
        return EMPTY
    if run_pk is None:
        return ident(run_id)
    return change_link("dagrun", run_pk, run_id)


#: A separator that starts a stacked line (``.task``, ``@ run``): it never wraps away from the
#: id after it (``.ar-line > .ar-sep`` keeps its words on one line).
_LINE = '<span class="ar-line">{}</span>'


def source_links(
    dag_id: str | None, task_id: str | None, run_pk: int | None, run_id: str | None
) -> SafeString | str:
    """Where an event came from, stacked: ``DAG`` / ``.task`` / ``@ run``, each a link on a
    line of its own (an ``ident``: two lines at most), or ``manual``."""
    if not dag_id:
        return "manual"
    return format_html(
        '<span class="ar-stack">' + _LINE + _LINE + _LINE + "</span>",
        dag_link(dag_id),
        format_html('<span class="ar-sep">.</span>{}', task_link(dag_id, task_id)),
        format_html('<span class="ar-sep"> @ </span>{}', run_link(run_pk, run_id)),
    )


def when(value: datetime | None) -> SafeString | str:
    """A timestamp the one way the registry shows them (``assets_app.formats.timestamp_human``,
    ``2026-11-30 21:32:42 UTC``), ISO 8601 in its ``datetime`` attribute. In a narrow column it
    wraps between the date and the time, never inside either."""
    if value is None:
        return EMPTY
    date, _, time = timestamp_human(value).partition(" ")
    return format_html(
        '<time class="ar-when" datetime="{}"><span class="ar-idp">{}</span> '
        '<span class="ar-idp">{}</span></time>',
        value.isoformat(),
        date,
        time,
    )


#: The states that are wrong (a red badge); running and waiting ones are blue and amber.
_BAD_STATES = frozenset({"failed", "upstream_failed", "removed"})
_ACTIVE_STATES = frozenset({"running", "restarting", "deferred"})
_WAITING_STATES = frozenset({"queued", "scheduled", "up_for_retry", "up_for_reschedule"})


def state_badge(state: str | None) -> SafeString | str:
    """A run's or a task instance's state as a coloured badge (green success, red failed, blue
    running, amber queued or waiting, grey the rest), as Airflow colours them."""
    if not state:
        return format_html('<span class="ar-badge ar-badge-none">{}</span>', "no state")
    if state == "success":
        tone = "good"
    elif state in _BAD_STATES:
        tone = "bad"
    elif state in _ACTIVE_STATES:
        tone = "active"
    elif state in _WAITING_STATES:
        tone = "waiting"
    else:
        tone = "quiet"
    return format_html(
        '<span class="ar-badge ar-badge-{} ar-state-is-{}">{}</span>',
        tone,
        state,
        state.replace("_", " "),
    )


def fact(text: str, *, wrong: bool = False) -> SafeString:
    """A boolean column's value as the fact it states ("paused", "stale", "active"); red only
    when ``wrong``."""
    return format_html('<span class="ar-fact{}">{}</span>', " ar-fact-wrong" if wrong else "", text)


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


def duration(value: timedelta | float | None) -> SafeString | str:
    """A duration as ``assets_app.formats.duration_human`` says it (``1.9 s``, ``2 m 40 s``),
    on one line."""
    if value is None:
        return EMPTY
    return format_html('<span class="ar-duration">{}</span>', duration_human(value))


@dataclass(frozen=True)
class WaitingDag:
    """A consumer DAG queued on an event's asset, its run not yet created."""

    dag_id: str
    is_paused: bool


def consumers(runs: Iterable[DagRun], waiting: Iterable[WaitingDag]) -> SafeString | str:
    """An event's consumers: the runs it triggered (links), then the DAGs still waiting on it
    (``waiting: dag (paused)``), or ``EMPTY``; the overview and the event list say the same."""
    # each run stacked as the producer is: ``DAG`` / ``@ run``, one block per run
    run_links: SafeString | str = (
        format_html_join(
            "",
            '<a class="ar-stack" href="{}">' + _LINE + _LINE + "</a>",
            (
                (
                    change_url("dagrun", run.pk),
                    ident(run.dag_id),
                    format_html('<span class="ar-sep"> @ </span>{}', ident(run.run_id)),
                )
                for run in runs
            ),
        )
        or EMPTY
    )
    waiting = list(waiting)
    if not waiting:
        return run_links
    dags = format_html_join(
        ", ",
        '<a href="{}">{}</a>{}',
        (
            (
                change_url("dag", dag.dag_id),
                ident(dag.dag_id),
                format_html(' <span class="ar-fact">(paused)</span>') if dag.is_paused else "",
            )
            for dag in waiting
        ),
    )
    if run_links == EMPTY:
        return format_html('<span class="ar-waiting-list">waiting: {}</span>', dags)
    # under the runs, on a line of its own (.ar-stack + .ar-waiting-list)
    return format_html('{}<span class="ar-waiting-list">waiting: {}</span>', run_links, dags)


def source_run_pk(*, event: str = "") -> Subquery:
    """The id of an event's source DAG run, if it is still there (a correlated subquery on the
    run's unique ``(dag_id, run_id)``, so a list page reads it in its one query). ``event``
    prefixes the path to the event (``"event__"`` from a link row)."""
    return Subquery(
        DagRun.objects.filter(
            dag_id=OuterRef(f"{event}source_dag_id"), run_id=OuterRef(f"{event}source_run_id")
        ).values("pk")[:1]
    )


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


_ModelT = TypeVar("_ModelT", bound=Model)


class PanelAdmin(admin.ModelAdmin[_ModelT]):
    """A change page showing its object's panel (``assets_app.admin.panels``) beside the form."""

    def panel_context(self, request: HttpRequest, obj: _ModelT) -> dict[str, Any]:
        """What the change page's template shows of ``obj`` besides the form."""
        raise NotImplementedError

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: _ModelT | None = None,
    ) -> HttpResponse:
        if obj is not None:
            context.update(self.panel_context(request, obj))
        return super().render_change_form(request, context, add, change, form_url, obj)


@dataclass(frozen=True)
class ObjectAction:
    """A button on a change page: a POST to ``<object_id>/do/<name>/`` that calls the admin's
    ``do_<name>(request, obj)`` (which goes through a service, says what happened with
    ``message_user`` and records it in the object's History), then comes back to the page, or
    goes to the page of the object ``do_<name>`` returns (a cleared task instance's new try)."""

    name: str
    label: str
    permission: str  # the model permission it needs ("change", "view", ...), as for actions


class ObjectActionsAdmin(PanelAdmin[_ModelT]):
    """A change page with ``object_actions`` buttons above its panel."""

    object_actions: ClassVar[tuple[ObjectAction, ...]] = ()

    def get_urls(self) -> list[URLPattern]:
        def run(request: HttpRequest, object_id: str, name: str) -> HttpResponse:
            return self._object_action_view(request, object_id, name)

        info = self.opts.app_label, self.opts.model_name
        return [
            path(
                "<path:object_id>/do/<slug:name>/",
                self.admin_site.admin_view(run),
                name="{}_{}_do".format(*info),
            ),
            *super().get_urls(),
        ]

    def _object_action_view(self, request: HttpRequest, object_id: str, name: str) -> HttpResponse:
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        action = next((a for a in self.object_actions if a.name == name), None)
        if action is None:
            raise Http404(f"no action {name!r}")
        obj = self.get_object(request, object_id)
        if obj is None:
            raise Http404(f"no {self.opts.verbose_name} {object_id!r}")
        if not self._may(request, action):
            raise PermissionDenied
        target = getattr(self, f"do_{name}")(request, obj) or obj
        return HttpResponseRedirect(change_url(str(self.opts.model_name), target.pk))

    def _may(self, request: HttpRequest, action: ObjectAction) -> bool:
        return bool(getattr(self, f"has_{action.permission}_permission")(request))

    def object_actions_for(self, request: HttpRequest, obj: _ModelT) -> list[tuple[str, str]]:
        """``(url, label)`` of the buttons the user may press on ``obj``'s page."""
        url = f"admin:{self.opts.app_label}_{self.opts.model_name}_do"
        return [
            (reverse(url, args=[obj.pk, action.name]), action.label)
            for action in self.object_actions
            if self._may(request, action)
        ]

    def render_change_form(
        self,
        request: HttpRequest,
        context: dict[str, Any],
        add: bool = False,
        change: bool = False,
        form_url: str = "",
        obj: _ModelT | None = None,
    ) -> HttpResponse:
        if obj is not None:
            context["object_actions"] = self.object_actions_for(request, obj)
        return super().render_change_form(request, context, add, change, form_url, obj)


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
    def event_timestamp(self, obj: AssetAliasAssetEvent | DagRunAssetEvent) -> SafeString | str:
        return when(obj.event.timestamp)
