"""Airflow 3.3's public API routes over the registry's selectors and services; mounted at
``/api/v2/`` by ``publicapi.urls``. Each view parses its input (``publicapi.params``), calls
one selector or service, and renders Airflow's datamodel (``publicapi.render``)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, ClassVar, Literal

from django.db import DatabaseError, connection
from django.db.models import Q, QuerySet
from django.utils import timezone
from pydantic import Field, TypeAdapter, ValidationError
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from assets_app.models import (
    PARTITION_KEY_LENGTH,
    Asset,
    AssetAlias,
    Dag,
    DagImportError,
    DagRun,
    XCom,
)
from assets_app.selectors.assets import (
    asset_events_detailed,
    asset_is_active,
    asset_list_detailed,
    asset_producing_dag_ids,
)
from assets_app.selectors.dags import dag_list, import_error_list, queued_events_query
from assets_app.selectors.runs import dag_run_get, dag_run_list, task_instances_of_run
from assets_app.services.assets.events import asset_event_create_manual
from assets_app.services.dags.declare import dags_set_paused
from assets_app.services.runs.clearing import task_instances_clear, task_instances_select
from assets_app.services.runs.dag_runs import dag_run_trigger
from assets_app.services.runs.marking import dag_run_mark
from assets_app.services.scheduling.queued_events import queued_events_delete
from assets_app.services.secrets.common import KEEP
from publicapi import render
from publicapi.base import PublicView, V, page, path_id, path_key, search
from publicapi.exceptions import BadRequest, Conflict, NotFound
from publicapi.params import (
    Body,
    BodyDatetime,
    Note,
    Page,
    Query,
    Text,
    UtcDatetime,
    body_parse,
    order_by_parse,
)
from publicapi.params import query_parse as parse

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
        rows = asset_list_detailed()
        for field in ("name", "uri"):
            rows = search(rows, field, getattr(q, f"{field}_pattern"), prefix=False)
            rows = search(rows, field, getattr(q, f"{field}_prefix_pattern"), prefix=True)
        if q.only_active:
            rows = rows.filter(asset_is_active())
        if q.dag_ids:
            rows = rows.filter(
                Q(scheduled_dags__dag_id__in=q.dag_ids)
                | Q(producing_tasks__dag_id__in=q.dag_ids)
                | Q(consuming_tasks__dag_id__in=q.dag_ids)
            ).distinct()
        rows = rows.order_by(*order_by_parse(q.order_by, allowed=ASSET_ORDER, default="id"))
        assets, total = page(rows, q)
        return Response({"assets": [render.asset(a) for a in assets], "total_entries": total})


class AssetDetailView(PublicView):
    required_permissions: ClassVar = {"GET": [V + "asset"]}

    def get(self, request: Request, asset_id: str) -> Response:
        found = asset_list_detailed().filter(pk=path_id(asset_id)).first()
        if found is None:
            raise NotFound(f"The Asset with ID: `{asset_id}` was not found")
        return Response(render.asset(found))


class MaterializeView(PublicView):
    """Airflow's ``materialize_asset``: trigger the one DAG with a task producing the asset.
    The run is ``manual`` (Airflow's is ``asset_materialization``): it is made by
    ``dag_run_trigger``, the registry's one way to trigger a DAG."""

    required_permissions: ClassVar = {"POST": [V + "asset", V + "dag", "assets_app.add_dagrun"]}

    def post(self, request: Request, asset_id: str) -> Response:
        dag_ids = asset_producing_dag_ids(asset_id=path_id(asset_id))
        if not dag_ids:
            raise NotFound(f"No Dag materializes asset with ID: {asset_id}")
        if len(dag_ids) > 1:
            raise Conflict(f"More than one Dag materializes asset with ID: {asset_id}")
        body = body_parse(MaterializeBody, request, optional=True)
        return Response(render.dag_run(_trigger(dag_ids[0], body)))


class AliasQuery(Page):
    name_pattern: Text | None = None
    name_prefix_pattern: Text | None = None
    order_by: list[Text] | None = None


class AliasListView(PublicView):
    required_permissions: ClassVar = {"GET": [V + "assetalias"]}

    def get(self, request: Request) -> Response:
        q = parse(AliasQuery, request.query_params, lists=("order_by",))
        rows = AssetAlias.objects.all()
        rows = search(rows, "name", q.name_pattern, prefix=False)
        rows = search(rows, "name", q.name_prefix_pattern, prefix=True)
        rows = rows.order_by(
            *order_by_parse(q.order_by, allowed={"id": "id", "name": "name"}, default="id")
        )
        aliases, total = page(rows, q)
        return Response(
            {"asset_aliases": [render.alias(a) for a in aliases], "total_entries": total}
        )


class AliasDetailView(PublicView):
    required_permissions: ClassVar = {"GET": [V + "assetalias"]}

    def get(self, request: Request, asset_alias_id: str) -> Response:
        found = AssetAlias.objects.filter(pk=path_id(asset_alias_id)).first()
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
        rows = asset_events_detailed()
        exact = {f: getattr(q, f) for f in EVENT_EXACT if getattr(q, f) is not None}
        ranges = {
            f"timestamp__{op}": getattr(q, f"timestamp_{op}")
            for op in ("gte", "gt", "lte", "lt")
            if getattr(q, f"timestamp_{op}") is not None
        }
        rows = rows.filter(**exact, **ranges)
        rows = search(rows, "asset__name", q.name_pattern, prefix=False)
        rows = search(rows, "asset__name", q.name_prefix_pattern, prefix=True)
        ordering = order_by_parse(q.order_by, allowed=EVENT_ORDER, default="timestamp")
        events, total = page(rows.order_by(*ordering, "id"), q)
        return Response(
            {"asset_events": [render.asset_event(e) for e in events], "total_entries": total}
        )

    def post(self, request: Request) -> Response:
        body = body_parse(CreateEventBody, request)
        name, uri = body.name, body.uri
        if body.asset_id is not None:
            target = Asset.objects.filter(pk=body.asset_id).first()
            if target is None:
                raise NotFound(f"Asset with ID: `{body.asset_id}` was not found")
            name, uri = target.name, target.uri
        event = asset_event_create_manual(
            name=name, uri=uri, extra=body.extra, partition_key=body.partition_key
        )
        return Response(render.asset_event(asset_events_detailed().get(pk=event.pk)))


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
            scope["dag_id"] = path_key(kwargs["dag_id"])
        if "asset_id" in kwargs:
            scope["asset_id"] = path_id(kwargs["asset_id"])
        return scope

    def get(self, request: Request, **kwargs: str) -> Response:
        scope = self._scope(request, kwargs)
        rows = list(queued_events_query(**scope))
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
    rows = dag_list()
    for pattern, prefix in (
        (q.dag_id_pattern, False),
        (q.dag_id_prefix_pattern, True),
        (q.dag_display_name_pattern, False),
        (q.dag_display_name_prefix_pattern, True),
    ):
        rows = search(rows, "dag_id", pattern, prefix=prefix)
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
    return body_parse(DagPatchBody, request)


class DagListView(PublicView):
    required_permissions: ClassVar = {
        "GET": [V + "dag"],
        "PATCH": [V + "dag", "assets_app.change_dag"],
    }

    def get(self, request: Request) -> Response:
        q = parse(DagQuery, request.query_params, lists=("order_by",))
        dags, total = page(_dags(q), q)
        return Response({"dags": [render.dag(d) for d in dags], "total_entries": total})

    def patch(self, request: Request) -> Response:
        """Airflow's bulk patch: the DAGs the filters select (``dag_id_pattern`` required)."""
        q = parse(DagQuery, request.query_params, lists=("order_by",))
        body = _patch_body(request)
        if q.dag_id_pattern is None:
            raise BadRequest("dag_id_pattern is required")
        selected = [d.dag_id for d in _dags(q)[q.bounds]]
        dags_set_paused(dag_ids=selected, is_paused=body.is_paused)
        dags = list(dag_list().filter(dag_id__in=selected).order_by("dag_id"))
        return Response({"dags": [render.dag(d) for d in dags], "total_entries": len(dags)})


class DagDetailView(PublicView):
    required_permissions: ClassVar = {
        "GET": [V + "dag"],
        "PATCH": [V + "dag", "assets_app.change_dag"],
    }

    def _get(self, dag_id: str) -> Dag:
        found = dag_list().filter(dag_id=path_key(dag_id)).first()
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
    return dag_run_get(dag_id=path_key(dag_id), run_id=path_key(run_id))


class TriggerBody(Body):
    """Airflow's ``TriggerDAGRunPostBody`` (``note`` is accepted and not kept: the trigger
    service keeps none; ``PATCH`` the run to write one)."""

    dag_run_id: Text | None = None
    logical_date: BodyDatetime
    data_interval_start: BodyDatetime = None
    data_interval_end: BodyDatetime = None
    run_after: BodyDatetime = None
    conf: dict[str, Any] | None = None
    note: Text | None = None
    partition_key: Annotated[Text, Field(max_length=PARTITION_KEY_LENGTH)] | None = None


class MaterializeBody(TriggerBody):
    """Airflow's ``MaterializeAssetBody``: the trigger body, the logical date optional."""

    logical_date: BodyDatetime = None


def _trigger(dag_id: str, body: TriggerBody) -> DagRun:
    """``dag_run_trigger`` with the body's fields; a null ``logical_date`` is now (the
    registry's runs always have one)."""
    interval = None
    if body.data_interval_start is not None or body.data_interval_end is not None:
        # an end not given is the logical date's, as the interval's default
        at = body.logical_date or timezone.now()
        interval = (body.data_interval_start or at, body.data_interval_end or at)
    return dag_run_trigger(
        dag_id=dag_id,
        run_id=body.dag_run_id,
        conf=body.conf,
        logical_date=body.logical_date,
        data_interval=interval,
        run_after=body.run_after,
        partition_key=body.partition_key,
    )


class DagRunListView(PublicView):
    required_permissions: ClassVar = {
        "GET": [V + "dagrun"],
        "POST": [V + "dag", "assets_app.add_dagrun"],
    }

    def post(self, request: Request, dag_id: str) -> Response:
        """Airflow's trigger: a queued manual run."""
        if dag_id == "~" or not Dag.objects.filter(dag_id=path_key(dag_id)).exists():
            raise NotFound(f"DAG with dag_id: '{dag_id}' not found")
        return Response(render.dag_run(_trigger(dag_id, body_parse(TriggerBody, request))))

    def get(self, request: Request, dag_id: str) -> Response:
        q = parse(DagRunQuery, request.query_params, lists=("run_type", "state", "order_by"))
        rows = dag_run_list()
        if dag_id != "~":
            if not Dag.objects.filter(dag_id=path_key(dag_id)).exists():
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
        rows = search(rows, "run_id", q.run_id_pattern, prefix=False)
        rows = rows.order_by(*order_by_parse(q.order_by, allowed=RUN_ORDER, default="id"))
        runs, total = page(rows, q)
        return Response({"dag_runs": [render.dag_run(r) for r in runs], "total_entries": total})


class DagRunPatchBody(Body):
    """Airflow's ``DAGRunPatchBody``."""

    state: Literal["queued", "success", "failed"] | None = None
    note: Note | None = None


class DagRunDetailView(PublicView):
    required_permissions: ClassVar = {
        "GET": [V + "dagrun"],
        "PATCH": [V + "dagrun", "assets_app.change_dagrun"],
    }

    def get(self, request: Request, dag_id: str, dag_run_id: str) -> Response:
        return Response(render.dag_run(_run(dag_id, dag_run_id)))

    def patch(self, request: Request, dag_id: str, dag_run_id: str) -> Response:
        """Airflow's ``patch_dag_run`` over ``dag_run_mark``: the fields given (and named by
        ``update_mask``, when given); a ``state`` of null changes nothing, a ``note`` of null
        clears it."""
        run = _run(dag_id, dag_run_id)
        mask = parse(UpdateMaskQuery, request.query_params, lists=("update_mask",)).update_mask
        body = body_parse(DagRunPatchBody, request)
        given = body.model_fields_set if mask is None else body.model_fields_set & set(mask)
        dag_run_mark(
            dag_id=run.dag_id,
            run_id=run.run_id,
            state=body.state if "state" in given else None,
            note=body.note if "note" in given else KEEP,
            user_id=str(request.user.pk),
        )
        return Response(render.dag_run(_run(dag_id, dag_run_id)))


class DagRunClearBody(Body):
    dry_run: bool = True
    only_failed: bool = False
    only_new: bool = False
    run_on_latest_version: bool | None = None
    note: Note | None = None


class DagRunClearView(PublicView):
    required_permissions: ClassVar = {"POST": [V + "dagrun", "assets_app.change_taskinstance"]}

    def post(self, request: Request, dag_id: str, dag_run_id: str) -> Response:
        run = _run(dag_id, dag_run_id)
        body = body_parse(DagRunClearBody, request)
        selected = task_instances_select(
            dag_id=run.dag_id, run_id=run.run_id, only_failed=body.only_failed
        )
        if body.dry_run:
            affected = list(
                task_instances_of_run(dag_id=run.dag_id, run_id=run.run_id).filter(
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
        rows = task_instances_of_run(dag_id=run.dag_id, run_id=run.run_id)
        tis, total = page(rows.order_by("task_id", "map_index"), q)
        return Response(
            {"task_instances": [render.task_instance(t) for t in tis], "total_entries": total}
        )


class TaskInstanceDetailView(PublicView):
    required_permissions: ClassVar = {"GET": [V + "taskinstance"]}

    def get(self, request: Request, dag_id: str, dag_run_id: str, task_id: str) -> Response:
        run = _run(dag_id, dag_run_id)
        found = (
            task_instances_of_run(dag_id=run.dag_id, run_id=run.run_id)
            .filter(task_id=path_key(task_id), map_index=-1)
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
                dag_id=path_key(dag_id),
                run_id=path_key(dag_run_id),
                task_id=path_key(task_id),
                key=path_key(xcom_key),
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
        rows: QuerySet[DagImportError] = import_error_list()
        rows = search(rows, "filename", q.filename_pattern, prefix=False)
        rows = search(rows, "filename", q.filename_prefix_pattern, prefix=True)
        if q.filename is not None:
            rows = rows.filter(filename=q.filename)
        if q.bundle_name is not None and q.bundle_name != "dags-folder":
            rows = rows.none()
        rows = rows.order_by(*order_by_parse(q.order_by, allowed=IMPORT_ERROR_ORDER, default="id"))
        errors, total = page(rows, q)
        return Response(
            {"import_errors": [render.import_error(e) for e in errors], "total_entries": total}
        )


class ImportErrorDetailView(PublicView):
    required_permissions: ClassVar = {"GET": [V + "dagimporterror"]}

    def get(self, request: Request, import_error_id: str) -> Response:
        found = import_error_list().filter(pk=path_id(import_error_id)).first()
        if found is None:
            raise NotFound(
                f"The ImportError with import_error_id: `{import_error_id}` was not found"
            )
        return Response(render.import_error(found))


class VersionView(PublicView):
    """No login needed, as Airflow's."""

    authentication_classes: list[Any] = []
    permission_classes: list[Any] = []

    def get(self, request: Request) -> Response:
        return Response({"version": render.AIRFLOW_VERSION, "git_version": None})


class HealthView(PublicView):
    """No login needed, as Airflow's; the metadatabase is checked with a query."""

    authentication_classes: list[Any] = []
    permission_classes: list[Any] = []

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
