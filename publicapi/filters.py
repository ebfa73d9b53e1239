"""The query parameters of ``/api/v2/``'s lists and what they select, one class per list.

Each class holds a list's parameters, parsed as Airflow's FastAPI app parses them
(``publicapi.params.query_parse``: a bad value is its 422), and narrows and orders the list's
queryset with :meth:`filter_queryset` as Airflow's ``*_pattern``, ``*_gte``… and ``order_by``
parameters do. The querysets come from the shared selectors (``assets_app.selectors``); the
page is cut by ``publicapi.base.page``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

from django.db.models import Q, QuerySet
from pydantic import Field, TypeAdapter, ValidationError

from assets_app.models import (
    Asset,
    AssetAlias,
    AssetEvent,
    Connection,
    Dag,
    DagImportError,
    DagRun,
    EventLog,
    Variable,
    XCom,
)
from assets_app.selectors.assets import asset_is_active
from publicapi.exceptions import BadRequest
from publicapi.params import Page, Query, Text, UtcDatetime, order_by_parse

#: the comparisons of a date range: ``<field>_gte``, ``_gt``, ``_lte``, ``_lt``
RANGES = ("gte", "gt", "lte", "lt")
_DATETIME: TypeAdapter[datetime] = TypeAdapter(UtcDatetime)


def pattern_terms(pattern: str) -> list[str]:
    """The alternatives of an Airflow ``*_pattern`` (``|`` between them), each matched as a
    case-insensitive substring."""
    return [term.strip() for term in pattern.split("|") if term.strip()] or [pattern]


def search(rows: QuerySet[Any], field: str, pattern: str | None, *, prefix: bool) -> QuerySet[Any]:
    """Airflow's ``*_pattern`` (case-insensitive substring, ``|`` for or, ``~`` for all) and
    ``*_prefix_pattern`` (case-sensitive prefix) filters."""
    if pattern is None or pattern == "~":
        return rows
    if prefix:
        return rows.filter(**{f"{field}__startswith": pattern})
    match = Q()
    for term in pattern_terms(pattern):
        match |= Q(**{f"{field}__icontains": term})
    return rows.filter(match)


def _ranges(params: Query, fields: tuple[str, ...]) -> dict[str, datetime]:
    """``{"<field>__<op>": value}`` of the date-range parameters given."""
    return {
        f"{field}__{op}": getattr(params, f"{field}_{op}")
        for field in fields
        for op in RANGES
        if getattr(params, f"{field}_{op}") is not None
    }


# --- assets -----------------------------------------------------------------------------------


class AssetFilter(Page):
    """``GET /assets``."""

    name_pattern: Text | None = None
    name_prefix_pattern: Text | None = None
    uri_pattern: Text | None = None
    uri_prefix_pattern: Text | None = None
    dag_ids: list[Text] = Field(default_factory=list)
    only_active: bool = True
    order_by: list[Text] | None = None

    ORDER: ClassVar = {f: f for f in ("id", "name", "uri", "created_at", "updated_at")}

    def filter_queryset(self, rows: QuerySet[Asset]) -> QuerySet[Asset]:
        for field in ("name", "uri"):
            rows = search(rows, field, getattr(self, f"{field}_pattern"), prefix=False)
            rows = search(rows, field, getattr(self, f"{field}_prefix_pattern"), prefix=True)
        if self.only_active:
            rows = rows.filter(asset_is_active())
        if self.dag_ids:
            rows = rows.filter(
                Q(scheduled_dags__dag_id__in=self.dag_ids)
                | Q(producing_tasks__dag_id__in=self.dag_ids)
                | Q(consuming_tasks__dag_id__in=self.dag_ids)
            ).distinct()
        return rows.order_by(*order_by_parse(self.order_by, allowed=self.ORDER, default="id"))


class AliasFilter(Page):
    """``GET /assets/aliases``."""

    name_pattern: Text | None = None
    name_prefix_pattern: Text | None = None
    order_by: list[Text] | None = None

    ORDER: ClassVar = {"id": "id", "name": "name"}

    def filter_queryset(self, rows: QuerySet[AssetAlias]) -> QuerySet[AssetAlias]:
        rows = search(rows, "name", self.name_pattern, prefix=False)
        rows = search(rows, "name", self.name_prefix_pattern, prefix=True)
        return rows.order_by(*order_by_parse(self.order_by, allowed=self.ORDER, default="id"))


class DagTagFilter(Page):
    """``GET /dagTags``: tag names, not rows (a DAG's tags are a list on its row)."""

    tag_name_pattern: Text | None = None
    tag_name_prefix_pattern: Text | None = None
    order_by: list[Text] | None = None

    ORDER: ClassVar = {"name": "name"}

    def select(self, names: set[str]) -> list[str]:
        """The names these parameters choose, in their order (the page is cut by the caller)."""
        ordering = order_by_parse(self.order_by, allowed=self.ORDER, default="name")
        chosen = sorted(names, reverse=ordering[0].startswith("-"))
        pattern, prefix = self.tag_name_pattern, self.tag_name_prefix_pattern
        if pattern is not None and pattern != "~":
            terms = [term.lower() for term in pattern_terms(pattern)]
            chosen = [n for n in chosen if any(term in n.lower() for term in terms)]
        if prefix is not None and prefix != "~":
            chosen = [n for n in chosen if n.startswith(prefix)]
        return chosen


class EventFilter(Page):
    """``GET /assets/events``."""

    order_by: list[Text] | None = None
    asset_id: int | None = None
    source_dag_id: Text | None = None
    source_task_id: Text | None = None
    source_run_id: Text | None = None
    source_map_index: int | None = None
    name_pattern: Text | None = None
    name_prefix_pattern: Text | None = None
    timestamp_gte: UtcDatetime | None = None
    timestamp_gt: UtcDatetime | None = None
    timestamp_lte: UtcDatetime | None = None
    timestamp_lt: UtcDatetime | None = None

    ORDER: ClassVar = {
        f: f
        for f in (
            "source_task_id",
            "source_dag_id",
            "source_run_id",
            "source_map_index",
            "timestamp",
        )
    }
    EXACT: ClassVar = (
        "asset_id",
        "source_dag_id",
        "source_task_id",
        "source_run_id",
        "source_map_index",
    )

    #: the integer filters' columns: a value beyond them names no row (not a database error)
    INTEGER_BOUNDS: ClassVar = {"asset_id": 2**63 - 1, "source_map_index": 2**31 - 1}

    def filter_queryset(self, rows: QuerySet[AssetEvent]) -> QuerySet[AssetEvent]:
        exact = {f: getattr(self, f) for f in self.EXACT if getattr(self, f) is not None}
        if any(
            not -bound - 1 <= exact[name] <= bound
            for name, bound in self.INTEGER_BOUNDS.items()
            if name in exact
        ):
            return rows.none()
        rows = rows.filter(**exact, **_ranges(self, ("timestamp",)))
        rows = search(rows, "asset__name", self.name_pattern, prefix=False)
        rows = search(rows, "asset__name", self.name_prefix_pattern, prefix=True)
        ordering = order_by_parse(self.order_by, allowed=self.ORDER, default="timestamp")
        return rows.order_by(*ordering, "id")


class QueuedEventsFilter(Query):
    """``GET``/``DELETE`` of queued events: ``before``, any text in Airflow's schema, parsed
    here (unparsable: Airflow's 400)."""

    before: Text | None = None

    def before_datetime(self) -> datetime | None:
        if self.before is None:
            return None
        try:
            return _DATETIME.validate_python(self.before)
        except ValidationError as exc:
            raise BadRequest(
                f"Invalid datetime: {self.before!r}. Please check the date parameter have this "
                "value."
            ) from exc


# --- DAGs and their runs ----------------------------------------------------------------------


class DagFilter(Page):
    """``GET /dags``, and the DAGs a bulk ``PATCH /dags`` changes."""

    dag_id_pattern: Text | None = None
    dag_id_prefix_pattern: Text | None = None
    dag_display_name_pattern: Text | None = None
    dag_display_name_prefix_pattern: Text | None = None
    exclude_stale: bool = True
    paused: bool | None = None
    has_asset_schedule: bool | None = None
    order_by: list[Text] | None = None

    ORDER: ClassVar = {"dag_id": "dag_id", "dag_display_name": "dag_id", "last_run_state": "dag_id"}

    def filter_queryset(self, rows: QuerySet[Dag]) -> QuerySet[Dag]:
        for pattern, prefix in (
            (self.dag_id_pattern, False),
            (self.dag_id_prefix_pattern, True),
            (self.dag_display_name_pattern, False),
            (self.dag_display_name_prefix_pattern, True),
        ):
            rows = search(rows, "dag_id", pattern, prefix=prefix)
        if self.exclude_stale:
            rows = rows.filter(is_stale=False)
        if self.paused is not None:
            rows = rows.filter(is_paused=self.paused)
        if self.has_asset_schedule is not None:
            rows = rows.filter(asset_expression__isnull=not self.has_asset_schedule)
        return rows.order_by(*order_by_parse(self.order_by, allowed=self.ORDER, default="dag_id"))


class DagRunFilter(Page):
    """``GET /dags/{dag_id}/dagRuns`` (the DAG, or ``~`` for all, is the view's)."""

    run_after_gte: UtcDatetime | None = None
    run_after_gt: UtcDatetime | None = None
    run_after_lte: UtcDatetime | None = None
    run_after_lt: UtcDatetime | None = None
    logical_date_gte: UtcDatetime | None = None
    logical_date_gt: UtcDatetime | None = None
    logical_date_lte: UtcDatetime | None = None
    logical_date_lt: UtcDatetime | None = None
    start_date_gte: UtcDatetime | None = None
    start_date_gt: UtcDatetime | None = None
    start_date_lte: UtcDatetime | None = None
    start_date_lt: UtcDatetime | None = None
    end_date_gte: UtcDatetime | None = None
    end_date_gt: UtcDatetime | None = None
    end_date_lte: UtcDatetime | None = None
    end_date_lt: UtcDatetime | None = None
    run_type: list[Text] = Field(default_factory=list)
    state: list[Text] = Field(default_factory=list)
    run_id_pattern: Text | None = None
    order_by: list[Text] | None = None

    ORDER: ClassVar = {
        "id": "id",
        "state": "state",
        "dag_id": "dag_id",
        "run_id": "run_id",
        "logical_date": "logical_date",
        "run_after": "run_after",
        "start_date": "start_date",
        "end_date": "end_date",
        "dag_run_id": "run_id",
    }
    DATES: ClassVar = ("run_after", "logical_date", "start_date", "end_date")

    def filter_queryset(self, rows: QuerySet[DagRun]) -> QuerySet[DagRun]:
        rows = rows.filter(**_ranges(self, self.DATES))
        if self.run_type:
            rows = rows.filter(run_type__in=self.run_type)
        if self.state:
            rows = rows.filter(state__in=self.state)
        rows = search(rows, "run_id", self.run_id_pattern, prefix=False)
        return rows.order_by(*order_by_parse(self.order_by, allowed=self.ORDER, default="id"))


class XComFilter(Page):
    """``GET …/taskInstances/{task_id}/xcomEntries`` (the DAG, run and task, each ``~`` for
    all, are the view's)."""

    xcom_key: Text | None = None
    map_index: int | None = Field(default=None, ge=-1)
    xcom_key_pattern: Text | None = None
    xcom_key_prefix_pattern: Text | None = None
    dag_display_name_pattern: Text | None = None
    dag_display_name_prefix_pattern: Text | None = None
    run_id_pattern: Text | None = None
    run_id_prefix_pattern: Text | None = None
    task_id_pattern: Text | None = None
    task_id_prefix_pattern: Text | None = None
    map_index_filter: int | None = None
    logical_date_gte: UtcDatetime | None = None
    logical_date_gt: UtcDatetime | None = None
    logical_date_lte: UtcDatetime | None = None
    logical_date_lt: UtcDatetime | None = None
    run_after_gte: UtcDatetime | None = None
    run_after_gt: UtcDatetime | None = None
    run_after_lte: UtcDatetime | None = None
    run_after_lt: UtcDatetime | None = None
    order_by: list[Text] | None = None

    ORDER: ClassVar = {
        **{f: f for f in ("key", "dag_id", "run_id", "task_id", "map_index", "timestamp")},
        "run_after": "dag_run__run_after",
    }
    #: Airflow's order when none is asked for
    DEFAULT_ORDER: ClassVar = ("dag_id", "task_id", "run_id", "map_index", "key")
    SEARCHED: ClassVar = {  # parameter prefix -> field (a DAG's display name is its id)
        "xcom_key": "key",
        "dag_display_name": "dag_id",
        "run_id": "run_id",
        "task_id": "task_id",
    }

    def filter_queryset(self, rows: QuerySet[XCom]) -> QuerySet[XCom]:
        if self.xcom_key is not None:
            rows = rows.filter(key=self.xcom_key)
        for index in (self.map_index, self.map_index_filter):
            if index is not None:
                rows = rows.filter(map_index=index)
        for name, field in self.SEARCHED.items():
            rows = search(rows, field, getattr(self, f"{name}_pattern"), prefix=False)
            rows = search(rows, field, getattr(self, f"{name}_prefix_pattern"), prefix=True)
        dates = _ranges(self, ("logical_date", "run_after"))
        rows = rows.filter(**{f"dag_run__{lookup}": value for lookup, value in dates.items()})
        if self.order_by is None:
            return rows.order_by(*self.DEFAULT_ORDER)
        return rows.order_by(*order_by_parse(self.order_by, allowed=self.ORDER, default="key"))


class ImportErrorFilter(Page):
    """``GET /importErrors``."""

    filename_pattern: Text | None = None
    filename_prefix_pattern: Text | None = None
    filename: Text | None = None
    bundle_name: Text | None = None
    order_by: list[Text] | None = None

    ORDER: ClassVar = {
        "id": "id",
        "import_error_id": "id",
        "timestamp": "timestamp",
        "filename": "filename",
        "bundle_name": "id",  # one bundle
        "stacktrace": "stacktrace",
    }

    def filter_queryset(self, rows: QuerySet[DagImportError]) -> QuerySet[DagImportError]:
        rows = search(rows, "filename", self.filename_pattern, prefix=False)
        rows = search(rows, "filename", self.filename_prefix_pattern, prefix=True)
        if self.filename is not None:
            rows = rows.filter(filename=self.filename)
        if self.bundle_name is not None and self.bundle_name != "dags-folder":
            rows = rows.none()
        return rows.order_by(*order_by_parse(self.order_by, allowed=self.ORDER, default="id"))


# --- event logs -------------------------------------------------------------------------------


class EventLogFilter(Page):
    """``GET /eventLogs``: Airflow 3.3's exact filters, ``before``/``after`` strict on
    ``when``, the ``*_pattern`` and ``*_prefix_pattern`` searches."""

    dag_id: Text | None = None
    task_id: Text | None = None
    run_id: Text | None = None
    map_index: int | None = None
    try_number: int | None = None
    owner: Text | None = None
    event: Text | None = None
    excluded_events: list[Text] | None = None
    included_events: list[Text] | None = None
    before: UtcDatetime | None = None
    after: UtcDatetime | None = None
    dag_id_pattern: Text | None = None
    task_id_pattern: Text | None = None
    run_id_pattern: Text | None = None
    owner_pattern: Text | None = None
    event_pattern: Text | None = None
    dag_id_prefix_pattern: Text | None = None
    task_id_prefix_pattern: Text | None = None
    run_id_prefix_pattern: Text | None = None
    owner_prefix_pattern: Text | None = None
    event_prefix_pattern: Text | None = None
    order_by: list[Text] | None = None

    LISTS: ClassVar = ("excluded_events", "included_events", "order_by")
    EXACT: ClassVar = ("dag_id", "task_id", "run_id", "map_index", "try_number", "owner", "event")
    SEARCHED: ClassVar = ("dag_id", "task_id", "run_id", "owner", "event")
    ORDER: ClassVar = {
        "id": "id",
        "event_log_id": "id",
        "dttm": "dttm",
        "when": "dttm",
        "dag_id": "dag_id",
        "task_id": "task_id",
        "run_id": "run_id",
        "event": "event",
        "logical_date": "logical_date",
        "owner": "owner",
        "extra": "extra",
    }

    def filter_queryset(self, rows: QuerySet[EventLog]) -> QuerySet[EventLog]:
        exact = {f: getattr(self, f) for f in self.EXACT if getattr(self, f) is not None}
        rows = rows.filter(**exact)
        if self.excluded_events is not None:
            rows = rows.exclude(event__in=self.excluded_events)
        if self.included_events is not None:
            rows = rows.filter(event__in=self.included_events)
        if self.before is not None:
            rows = rows.filter(dttm__lt=self.before)
        if self.after is not None:
            rows = rows.filter(dttm__gt=self.after)
        for field in self.SEARCHED:
            rows = search(rows, field, getattr(self, f"{field}_pattern"), prefix=False)
            rows = search(rows, field, getattr(self, f"{field}_prefix_pattern"), prefix=True)
        ordering = order_by_parse(self.order_by, allowed=self.ORDER, default="id")
        return rows.order_by(*ordering, "id")


# --- variables and connections ----------------------------------------------------------------


class VariableFilter(Page):
    """``GET /variables``."""

    variable_key_pattern: Text | None = None
    variable_key_prefix_pattern: Text | None = None
    order_by: list[Text] | None = None

    #: Airflow's sortable columns (``_val`` is the stored, encrypted value; there are no teams)
    ORDER: ClassVar = {
        "key": "key",
        "id": "id",
        "_val": "encrypted_val",
        "description": "description",
        "is_encrypted": "is_encrypted",
        "team_name": "id",
    }

    def filter_queryset(self, rows: QuerySet[Variable]) -> QuerySet[Variable]:
        rows = search(rows, "key", self.variable_key_pattern, prefix=False)
        rows = search(rows, "key", self.variable_key_prefix_pattern, prefix=True)
        ordering = order_by_parse(self.order_by, allowed=self.ORDER, default="id")
        return rows.order_by(*ordering, "id")


class ConnectionFilter(Page):
    """``GET /connections``."""

    connection_id_pattern: Text | None = None
    connection_id_prefix_pattern: Text | None = None
    order_by: list[Text] | None = None

    ORDER: ClassVar = {
        "conn_id": "conn_id",
        "connection_id": "conn_id",
        "conn_type": "conn_type",
        "description": "description",
        "host": "host",
        "port": "port",
        "id": "id",
        "team_name": "id",
    }

    def filter_queryset(self, rows: QuerySet[Connection]) -> QuerySet[Connection]:
        rows = search(rows, "conn_id", self.connection_id_pattern, prefix=False)
        rows = search(rows, "conn_id", self.connection_id_prefix_pattern, prefix=True)
        ordering = order_by_parse(self.order_by, allowed=self.ORDER, default="id")
        return rows.order_by(*ordering, "id")
