"""Airflow 3.3's public API routes over the registry's selectors and services; mounted at
``/api/v2/`` by ``publicapi.urls``. Each view parses its input (``publicapi.params``), calls
one selector or service, and renders Airflow's datamodel (``publicapi.render``)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, ClassVar

from django.db import DatabaseError, connection
from django.db.models import Q, QuerySet
from django.http import Http404
from django.utils import timezone
from pydantic import Field, TypeAdapter, ValidationError
from rest_framework import status
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from assets_app import selectors
from assets_app.models import (
    PARTITION_KEY_LENGTH,
    Asset,
    AssetAlias,
    Dag,
    DagImportError,
    DagRun,
    XCom,
)
from assets_app.services.asset_events import asset_event_create_manual
from assets_app.services.clearing import task_instances_clear, task_instances_select
from assets_app.services.dag_runs import dag_run_trigger
from assets_app.services.dags import dags_set_paused
from assets_app.services.queued_events import queued_events_delete
from operatorapi import selectors as operator_selectors
from publicapi import render
from publicapi.auth import BearerAuthentication
from publicapi.exceptions import BadRequest, NotFound, exception_handler
from publicapi.params import (
    Body,
    BodyDatetime,
    Page,
    Query,
    Text,
    UtcDatetime,
    body_parse,
    order_by_parse,
)
from publicapi.params import query_parse as parse
from publicapi.permissions import RoutePermissions

V = "assets_app.view_"


class PublicView(APIView):
    authentication_classes = [BearerAuthentication]
    permission_classes = [RoutePermissions]
    renderer_classes = [JSONRenderer]
    parser_classes: ClassVar[list[Any]] = []  # bodies are read raw by ``body_parse``
    required_permissions: ClassVar[dict[str, list[str]]] = {}
    schema = None  # described by Airflow's own document (publicapi.schema), not drf-spectacular

    def get_exception_handler(self) -> Any:
        return exception_handler


def _id(value: str) -> int:
    """A path id: an integer that fits a database id, else no such row."""
    if not value.isdigit() or len(value) > 18:
        raise Http404
    return int(value)


def _key(value: str) -> str:
    """A path key (dag id, run id …): one holding NUL can name no row."""
    if "\x00" in value:
        raise Http404
    return value


def _search(rows: QuerySet[Any], field: str, pattern: str | None, *, prefix: bool) -> QuerySet[Any]:
    """Airflow's ``*_pattern`` (case-insensitive substring, ``|`` for or, ``~`` for all) and
    ``*_prefix_pattern`` (case-sensitive prefix) filters."""
    if pattern is None or pattern == "~":
        return rows
    if prefix:
        return rows.filter(**{f"{field}__startswith": pattern})
    terms = [term.strip() for term in pattern.split("|") if term.strip()] or [pattern]
    match = Q()
    for term in terms:
        match |= Q(**{f"{field}__icontains": term})
    return rows.filter(match)


def _page(rows: QuerySet[Any], page: Page) -> tuple[list[Any], int]:
    return list(rows[page.bounds]), rows.count()


# --- assets -----------------------------------------------------------------------------------


class AssetQuery(Page):
    name_pattern: Text | None = None
    name_prefix_pattern: Text | None = None
    uri_pattern: Text | None = None
    uri_prefix_pattern: Text | None = None
    dag_ids: list[Text] = Field(default_factory=list)
    only_active: bool = True
    order_by: list[Text] | None = None


ASSET_ORDER = {f: f for f in ("id", "name", "uri", "created_at", "updated_at")}


class AssetListView(PublicView):
    required_permissions: ClassVar = {"GET": [V + "asset"]}

    def get(self, request: Request) -> Response:
        q = parse(AssetQuery, request.query_params, lists=("dag_ids", "order_by"))
        rows = selectors.asset_list_detailed()
        for field in ("name", "uri"):
            rows = _search(rows, field, getattr(q, f"{field}_pattern"), prefix=False)
            rows = _search(rows, field, getattr(q, f"{field}_prefix_pattern"), prefix=True)
        if q.only_active:
            rows = rows.filter(active__isnull=False)
        if q.dag_ids:
            rows = rows.filter(
                Q(scheduled_dags__dag_id__in=q.dag_ids)
                | Q(producing_tasks__dag_id__in=q.dag_ids)
                | Q(consuming_tasks__dag_id__in=q.dag_ids)
            ).distinct()
        rows = rows.order_by(*order_by_parse(q.order_by, allowed=ASSET_ORDER, default="id"))
        assets, total = _page(rows, q)
        return Response({"assets": [render.asset(a) for a in assets], "total_entries": total})


class AssetDetailView(PublicView):
    required_permissions: ClassVar = {"GET": [V + "asset"]}

    def get(self, request: Request, asset_id: str) -> Response:
        found = selectors.asset_list_detailed().filter(pk=_id(asset_id)).first()
        if found is None:
            raise NotFound(f"The Asset with ID: `{asset_id}` was not found")
        return Response(render.asset(found))


class AliasQuery(Page):
    name_pattern: Text | None = None
    name_prefix_pattern: Text | None = None
    order_by: list[Text] | None = None


class AliasListView(PublicView):
    required_permissions: ClassVar = {"GET": [V + "assetalias"]}

    def get(self, request: Request) -> Response:
        q = parse(AliasQuery, request.query_params, lists=("order_by",))
        rows = AssetAlias.objects.all()
        rows = _search(rows, "name", q.name_pattern, prefix=False)
        rows = _search(rows, "name", q.name_prefix_pattern, prefix=True)
        rows = rows.order_by(
            *order_by_parse(q.order_by, allowed={"id": "id", "name": "name"}, default="id")
        )
        aliases, total = _page(rows, q)
        return Response(
            {"asset_aliases": [render.alias(a) for a in aliases], "total_entries": total}
        )


class AliasDetailView(PublicView):
    required_permissions: ClassVar = {"GET": [V + "assetalias"]}

    def get(self, request: Request, asset_alias_id: str) -> Response:
        found = AssetAlias.objects.filter(pk=_id(asset_alias_id)).first()
        if found is None:
            raise NotFound(f"The Asset Alias with ID: `{asset_alias_id}` was not found")
        return Response(render.alias(found))


class EventQuery(Page):
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


EVENT_ORDER = {
    f: f
    for f in ("source_task_id", "source_dag_id", "source_run_id", "source_map_index", "timestamp")
}
EVENT_EXACT = ("asset_id", "source_dag_id", "source_task_id", "source_run_id", "source_map_index")


class CreateEventBody(Body):
    """Airflow's ``CreateAssetEventsBody`` (``asset_id``), or the asset by ``name``/``uri``."""

    asset_id: int | None = None
    name: Text | None = None
    uri: Text | None = None
    partition_key: Text | None = None
    extra: dict[str, Any] = Field(default_factory=dict)
    #: Airflow's multi-team consumers; the registry has no teams, every consumer is global
    access_control: dict[str, Any] | None = None


class AssetEventListView(PublicView):
    required_permissions: ClassVar = {
        "GET": [V + "assetevent"],
        "POST": ["assets_app.add_assetevent"],
    }

    def get(self, request: Request) -> Response:
        q = parse(EventQuery, request.query_params, lists=("order_by",))
        rows = selectors.asset_events_detailed()
        exact = {f: getattr(q, f) for f in EVENT_EXACT if getattr(q, f) is not None}
        ranges = {
            f"timestamp__{op}": getattr(q, f"timestamp_{op}")
            for op in ("gte", "gt", "lte", "lt")
            if getattr(q, f"timestamp_{op}") is not None
        }
        rows = rows.filter(**exact, **ranges)
        rows = _search(rows, "asset__name", q.name_pattern, prefix=False)
        rows = _search(rows, "asset__name", q.name_prefix_pattern, prefix=True)
        ordering = order_by_parse(q.order_by, allowed=EVENT_ORDER, default="timestamp")
        events, total = _page(rows.order_by(*ordering, "id"), q)
        return Response(
            {"asset_events": [render.asset_event(e) for e in events], "total_entries": total}
        )

    def post(self, request: Request) -> Response:
        body = body_parse(CreateEventBody, request.body)
        name, uri = body.name, body.uri
        if body.asset_id is not None:
            target = Asset.objects.filter(pk=body.asset_id).first()
            if target is None:
                raise NotFound(f"Asset with ID: `{body.asset_id}` was not found")
            name, uri = target.name, target.uri
        event = asset_event_create_manual(
            name=name, uri=uri, extra=body.extra, partition_key=body.partition_key
        )
        return Response(render.asset_event(selectors.asset_events_detailed().get(pk=event.pk)))


# --- queued events ----------------------------------------------------------------------------


class BeforeQuery(Query):
    before: Text | None = None


_DATETIME: TypeAdapter[datetime] = TypeAdapter(UtcDatetime)


def _before(value: str | None) -> datetime | None:
    """Airflow's ``before``: any text in the schema, parsed here; unparsable → its 400."""
    if value is None:
        return None
    try:
        return _DATETIME.validate_python(value)
    except ValidationError as exc:
        raise BadRequest(
            f"Invalid datetime: {value!r}. Please check the date parameter have this value."
        ) from exc


class QueuedEventsView(PublicView):
    """``GET``/``DELETE`` of the queue rows of an asset, a DAG, or a DAG and an asset."""

    required_permissions: ClassVar = {
        "GET": [V + "assetdagrunqueue"],
        "DELETE": ["assets_app.delete_assetdagrunqueue"],
    }

    def _scope(self, request: Request, kwargs: dict[str, str]) -> dict[str, Any]:
        q = parse(BeforeQuery, request.query_params)
        scope: dict[str, Any] = {"before": _before(q.before)}
        if "dag_id" in kwargs:
            scope["dag_id"] = _key(kwargs["dag_id"])
        if "asset_id" in kwargs:
            scope["asset_id"] = _id(kwargs["asset_id"])
        return scope

    def get(self, request: Request, **kwargs: str) -> Response:
        scope = self._scope(request, kwargs)
        rows = list(selectors.queued_events_query(**scope))
        if not rows:
            what = " and ".join(
                f"{k}: `{kwargs[k]}`" for k in ("dag_id", "asset_id") if k in kwargs
            )
            raise NotFound(f"Queue event with {what} was not found")
        if "dag_id" in kwargs and "asset_id" in kwargs:
            return Response(render.queued_event(rows[0]))  # the one row of the pair
        return Response(
            {"queued_events": [render.queued_event(r) for r in rows], "total_entries": len(rows)}
        )

    def delete(self, request: Request, **kwargs: str) -> Response:
        queued_events_delete(**self._scope(request, kwargs))
        return Response(status=status.HTTP_204_NO_CONTENT)


# --- DAGs -------------------------------------------------------------------------------------


class DagQuery(Page):
    dag_id_pattern: Text | None = None
    dag_id_prefix_pattern: Text | None = None
    dag_display_name_pattern: Text | None = None
    dag_display_name_prefix_pattern: Text | None = None
    exclude_stale: bool = True
    paused: bool | None = None
    has_asset_schedule: bool | None = None
    order_by: list[Text] | None = None


DAG_ORDER = {"dag_id": "dag_id", "dag_display_name": "dag_id", "last_run_state": "dag_id"}


def _dags(q: DagQuery) -> QuerySet[Dag]:
    rows = operator_selectors.dag_list()
    for pattern, prefix in (
        (q.dag_id_pattern, False),
        (q.dag_id_prefix_pattern, True),
        (q.dag_display_name_pattern, False),
        (q.dag_display_name_prefix_pattern, True),
    ):
        rows = _search(rows, "dag_id", pattern, prefix=prefix)
    if q.exclude_stale:
        rows = rows.filter(is_stale=False)
    if q.paused is not None:
        rows = rows.filter(is_paused=q.paused)
    if q.has_asset_schedule is not None:
        rows = rows.filter(asset_expression__isnull=not q.has_asset_schedule)
    return rows.order_by(*order_by_parse(q.order_by, allowed=DAG_ORDER, default="dag_id"))


class DagPatchBody(Body):
    is_paused: bool


class UpdateMaskQuery(Query):
    update_mask: list[Text] | None = None


def _patch_body(request: Request) -> DagPatchBody:
    mask = parse(UpdateMaskQuery, request.query_params, lists=("update_mask",)).update_mask
    if mask is not None and mask != ["is_paused"]:
        raise BadRequest("Only `is_paused` field can be updated through the REST API")
    return body_parse(DagPatchBody, request.body)


class DagListView(PublicView):
    required_permissions: ClassVar = {
        "GET": [V + "dag"],
        "PATCH": [V + "dag", "assets_app.change_dag"],
    }

    def get(self, request: Request) -> Response:
        q = parse(DagQuery, request.query_params, lists=("order_by",))
        dags, total = _page(_dags(q), q)
        return Response({"dags": [render.dag(d) for d in dags], "total_entries": total})

    def patch(self, request: Request) -> Response:
        """Airflow's bulk patch: the DAGs the filters select (``dag_id_pattern`` required)."""
        q = parse(DagQuery, request.query_params, lists=("order_by",))
        body = _patch_body(request)
        if q.dag_id_pattern is None:
            raise BadRequest("dag_id_pattern is required")
        selected = [d.dag_id for d in _dags(q)[q.bounds]]
        dags_set_paused(dag_ids=selected, is_paused=body.is_paused)
        dags = list(operator_selectors.dag_list().filter(dag_id__in=selected).order_by("dag_id"))
        return Response({"dags": [render.dag(d) for d in dags], "total_entries": len(dags)})


class DagDetailView(PublicView):
    required_permissions: ClassVar = {
        "GET": [V + "dag"],
        "PATCH": [V + "dag", "assets_app.change_dag"],
    }

    def _get(self, dag_id: str) -> Dag:
        found = operator_selectors.dag_list().filter(dag_id=_key(dag_id)).first()
        if found is None:
            raise NotFound(f"Dag with id {dag_id} was not found")
        return found

    def get(self, request: Request, dag_id: str) -> Response:
        return Response(render.dag(self._get(dag_id)))

    def patch(self, request: Request, dag_id: str) -> Response:
        found = self._get(dag_id)
        body = _patch_body(request)
        dags_set_paused(dag_ids=[found.dag_id], is_paused=body.is_paused)
        found.refresh_from_db()
        return Response(render.dag(found))


# --- DAG runs ---------------------------------------------------------------------------------


class DagRunQuery(Page):
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


RUN_ORDER = {
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
RUN_DATES = ("run_after", "logical_date", "start_date", "end_date")


def _run(dag_id: str, run_id: str) -> DagRun:
    found = DagRun.objects.filter(dag_id=_key(dag_id), run_id=_key(run_id)).first()
    if found is None:
        raise NotFound(f"The DagRun with dag_id: `{dag_id}` and run_id: `{run_id}` was not found")
    return found


class TriggerBody(Body):
    """Airflow's ``TriggerDAGRunPostBody`` (``note`` is accepted and not kept: the registry's
    runs have no notes)."""

    dag_run_id: Text | None = None
    logical_date: BodyDatetime
    data_interval_start: BodyDatetime = None
    data_interval_end: BodyDatetime = None
    run_after: BodyDatetime = None
    conf: dict[str, Any] | None = None
    note: Text | None = None
    partition_key: Annotated[Text, Field(max_length=PARTITION_KEY_LENGTH)] | None = None


class DagRunListView(PublicView):
    required_permissions: ClassVar = {
        "GET": [V + "dagrun"],
        "POST": [V + "dag", "assets_app.add_dagrun"],
    }

    def post(self, request: Request, dag_id: str) -> Response:
        """Airflow's trigger (``dag_run_trigger``): a queued manual run; a null
        ``logical_date`` is now (the registry's runs always have one)."""
        if dag_id == "~" or not Dag.objects.filter(dag_id=_key(dag_id)).exists():
            raise NotFound(f"DAG with dag_id: '{dag_id}' not found")
        body = body_parse(TriggerBody, request.body)
        interval = None
        if body.data_interval_start is not None or body.data_interval_end is not None:
            # an end not given is the logical date's, as the interval's default
            at = body.logical_date or timezone.now()
            interval = (body.data_interval_start or at, body.data_interval_end or at)
        dag_run = dag_run_trigger(
            dag_id=dag_id,
            run_id=body.dag_run_id,
            conf=body.conf,
            logical_date=body.logical_date,
            data_interval=interval,
            run_after=body.run_after,
            partition_key=body.partition_key,
        )
        return Response(render.dag_run(dag_run))

    def get(self, request: Request, dag_id: str) -> Response:
        q = parse(DagRunQuery, request.query_params, lists=("run_type", "state", "order_by"))
        rows = operator_selectors.dag_run_list()
        if dag_id != "~":
            if not Dag.objects.filter(dag_id=_key(dag_id)).exists():
                raise NotFound(f"The DAG with dag_id: `{dag_id}` was not found")
            rows = rows.filter(dag_id=dag_id)
        ranges = {
            f"{field}__{op}": getattr(q, f"{field}_{op}")
            for field in RUN_DATES
            for op in ("gte", "gt", "lte", "lt")
            if getattr(q, f"{field}_{op}") is not None
        }
        rows = rows.filter(**ranges)
        if q.run_type:
            rows = rows.filter(run_type__in=q.run_type)
        if q.state:
            rows = rows.filter(state__in=q.state)
        rows = _search(rows, "run_id", q.run_id_pattern, prefix=False)
        rows = rows.order_by(*order_by_parse(q.order_by, allowed=RUN_ORDER, default="id"))
        runs, total = _page(rows, q)
        return Response({"dag_runs": [render.dag_run(r) for r in runs], "total_entries": total})


class DagRunDetailView(PublicView):
    required_permissions: ClassVar = {"GET": [V + "dagrun"]}

    def get(self, request: Request, dag_id: str, dag_run_id: str) -> Response:
        return Response(render.dag_run(_run(dag_id, dag_run_id)))


class DagRunClearBody(Body):
    dry_run: bool = True
    only_failed: bool = False
    only_new: bool = False
    run_on_latest_version: bool | None = None
    note: Annotated[Text, Field(max_length=1000)] | None = None


class DagRunClearView(PublicView):
    required_permissions: ClassVar = {"POST": [V + "dagrun", "assets_app.change_taskinstance"]}

    def post(self, request: Request, dag_id: str, dag_run_id: str) -> Response:
        run = _run(dag_id, dag_run_id)
        body = body_parse(DagRunClearBody, request.body)
        selected = task_instances_select(
            dag_id=run.dag_id, run_id=run.run_id, only_failed=body.only_failed
        )
        if body.dry_run:
            affected = list(
                selectors.task_instances_of_run(dag_id=run.dag_id, run_id=run.run_id).filter(
                    pk__in=[
                        c.task_instance_id
                        for c in task_instances_clear(task_instances=selected, dry_run=True).cleared
                    ]
                )
            )
            return Response(
                {
                    "task_instances": [render.task_instance(t) for t in affected],
                    "total_entries": len(affected),
                }
            )
        task_instances_clear(task_instances=selected, dry_run=False)
        run.refresh_from_db()
        return Response(render.dag_run(run))


# --- task instances and XComs -----------------------------------------------------------------


class TaskInstanceListView(PublicView):
    required_permissions: ClassVar = {"GET": [V + "taskinstance"]}

    def get(self, request: Request, dag_id: str, dag_run_id: str) -> Response:
        run = _run(dag_id, dag_run_id)
        q = parse(Page, request.query_params)
        rows = selectors.task_instances_of_run(dag_id=run.dag_id, run_id=run.run_id)
        tis, total = _page(rows.order_by("task_id", "map_index"), q)
        return Response(
            {"task_instances": [render.task_instance(t) for t in tis], "total_entries": total}
        )


class TaskInstanceDetailView(PublicView):
    required_permissions: ClassVar = {"GET": [V + "taskinstance"]}

    def get(self, request: Request, dag_id: str, dag_run_id: str, task_id: str) -> Response:
        run = _run(dag_id, dag_run_id)
        found = (
            selectors.task_instances_of_run(dag_id=run.dag_id, run_id=run.run_id)
            .filter(task_id=_key(task_id), map_index=-1)
            .first()
        )
        if found is None:
            raise NotFound(
                f"The Task Instance with dag_id: `{dag_id}`, run_id: `{dag_run_id}`, "
                f"task_id: `{task_id}` and map_index: `-1` was not found"
            )
        return Response(render.task_instance(found))


class XComQuery(Query):
    map_index: int = Field(default=-1, ge=-1)
    deserialize: bool = False
    stringify: bool = False


class XComDetailView(PublicView):
    required_permissions: ClassVar = {"GET": [V + "xcom"]}

    def get(
        self, request: Request, dag_id: str, dag_run_id: str, task_id: str, xcom_key: str
    ) -> Response:
        q = parse(XComQuery, request.query_params)
        found = (
            XCom.objects.select_related("dag_run")
            .filter(
                dag_id=_key(dag_id),
                run_id=_key(dag_run_id),
                task_id=_key(task_id),
                key=_key(xcom_key),
                map_index=q.map_index,
            )
            .first()
        )
        if found is None:
            raise NotFound(f"XCom entry with key: `{xcom_key}` not found")
        # Airflow: the stored (serialized) value as a string unless ``deserialize``; then the
        # native value unless ``stringify``. The registry stores JSON, its own serialization.
        return Response(render.xcom(found, stringify=not q.deserialize or q.stringify))


# --- monitoring -------------------------------------------------------------------------------


# --- import errors ----------------------------------------------------------------------------


class ImportErrorQuery(Page):
    filename_pattern: Text | None = None
    filename_prefix_pattern: Text | None = None
    filename: Text | None = None
    bundle_name: Text | None = None
    order_by: list[Text] | None = None


IMPORT_ERROR_ORDER = {
    "id": "id",
    "import_error_id": "id",
    "timestamp": "timestamp",
    "filename": "filename",
    "bundle_name": "id",  # one bundle
    "stacktrace": "stacktrace",
}


class ImportErrorListView(PublicView):
    required_permissions: ClassVar = {"GET": [V + "dagimporterror"]}

    def get(self, request: Request) -> Response:
        q = parse(ImportErrorQuery, request.query_params, lists=("order_by",))
        rows: QuerySet[DagImportError] = operator_selectors.import_error_list()
        rows = _search(rows, "filename", q.filename_pattern, prefix=False)
        rows = _search(rows, "filename", q.filename_prefix_pattern, prefix=True)
        if q.filename is not None:
            rows = rows.filter(filename=q.filename)
        if q.bundle_name is not None and q.bundle_name != "dags-folder":
            rows = rows.none()
        rows = rows.order_by(*order_by_parse(q.order_by, allowed=IMPORT_ERROR_ORDER, default="id"))
        errors, total = _page(rows, q)
        return Response(
            {"import_errors": [render.import_error(e) for e in errors], "total_entries": total}
        )


class ImportErrorDetailView(PublicView):
    required_permissions: ClassVar = {"GET": [V + "dagimporterror"]}

    def get(self, request: Request, import_error_id: str) -> Response:
        found = operator_selectors.import_error_list().filter(pk=_id(import_error_id)).first()
        if found is None:
            raise NotFound(
                f"The ImportError with import_error_id: `{import_error_id}` was not found"
            )
        return Response(render.import_error(found))


class VersionView(PublicView):
    """No login needed, as Airflow's."""

    authentication_classes: ClassVar = []
    permission_classes: ClassVar = []

    def get(self, request: Request) -> Response:
        return Response({"version": render.AIRFLOW_VERSION, "git_version": None})


class HealthView(PublicView):
    """No login needed, as Airflow's; the metadatabase is checked with a query."""

    authentication_classes: ClassVar = []
    permission_classes: ClassVar = []

    def get(self, request: Request) -> Response:
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT 1")
            database = "healthy"
        except DatabaseError:
            database = "unhealthy"
        return Response(
            {
                "metadatabase": {"status": database},
                "scheduler": {"status": None, "latest_scheduler_heartbeat": None},
                "triggerer": {"status": None, "latest_triggerer_heartbeat": None},
                "dag_processor": None,
            }
        )
