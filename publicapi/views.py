"""Airflow 3.3's public API routes over the registry's selectors and services; mounted at
``/api/v2/`` by ``publicapi.urls``. Each view parses its input (``publicapi.filters`` for a
list's query, ``publicapi.bodies`` for a body), calls one selector or service
(``publicapi.selectors``, ``assets_app``), and renders Airflow's datamodel
(``publicapi.render``). Variables and connections are in ``publicapi.secrets``."""

from __future__ import annotations

from typing import Any, ClassVar

from django.http import HttpResponse, HttpResponseBase
from pydantic import Field
from rest_framework import status
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from assets_app.models import Dag, DagRun, TaskInstance
from assets_app.selectors.assets import (
    asset_events_detailed,
    asset_list_detailed,
    asset_producing_dag_ids,
)
from assets_app.selectors.audit import event_log_get, event_log_list
from assets_app.selectors.dags import (
    dag_code_get,
    dag_list,
    dag_tag_names,
    import_error_list,
    queued_events_query,
)
from assets_app.selectors.runs import (
    dag_run_get,
    dag_run_state_counts,
    task_instance_waiting_reason,
)
from assets_app.services.assets.events import asset_event_create_manual
from assets_app.services.audit import Actor
from assets_app.services.dags.declare import dags_set_paused
from assets_app.services.inputs import KEEP
from assets_app.services.runs.clearing import task_instances_clear, task_instances_select
from assets_app.services.runs.dag_runs import INTEGER_MAX, dag_run_trigger
from assets_app.services.runs.marking import dag_run_mark, task_instances_mark
from assets_app.services.scheduling.queued_events import queued_events_delete
from publicapi import render, selectors
from publicapi.base import (
    ANY,
    JSON,
    TEXT,
    PublicView,
    V,
    accepted,
    page,
    page_rows,
    path_id,
    path_key,
)
from publicapi.bodies import (
    CreateEventBody,
    DagPatchBody,
    DagRunClearBody,
    DagRunPatchBody,
    MaterializeBody,
    TaskInstancePatchBody,
    TriggerBody,
)
from publicapi.exceptions import BadRequest, Conflict, NotFound
from publicapi.filters import (
    AliasFilter,
    AssetFilter,
    DagFilter,
    DagRunFilter,
    DagTagFilter,
    EventFilter,
    EventLogFilter,
    ImportErrorFilter,
    QueuedEventsFilter,
    XComFilter,
)
from publicapi.params import (
    Page,
    Query,
    SourceQuery,
    Text,
    UpdateMaskQuery,
    body_parse,
    path_parse,
)
from publicapi.params import query_parse as parse

# --- assets -----------------------------------------------------------------------------------


class AssetListView(PublicView):
    required_permissions: ClassVar = {"GET": [V + "asset"]}

    def get(self, request: Request) -> Response:
        q = parse(AssetFilter, request.query_params, lists=("dag_ids", "order_by"))
        assets, total = page(q.filter_queryset(asset_list_detailed()), q)
        return Response({"assets": [render.asset(a) for a in assets], "total_entries": total})


class AssetDetailView(PublicView):
    required_permissions: ClassVar = {"GET": [V + "asset"]}

    def get(self, request: Request, asset_id: str) -> Response:
        found = selectors.asset_detailed_get(asset_id=path_id(asset_id))
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
        run = _trigger(dag_ids[0], body, request, event="materialize_asset")
        return Response(render.dag_run(run))


class AliasListView(PublicView):
    required_permissions: ClassVar = {"GET": [V + "assetalias"]}

    def get(self, request: Request) -> Response:
        q = parse(AliasFilter, request.query_params, lists=("order_by",))
        aliases, total = page(q.filter_queryset(selectors.alias_list()), q)
        return Response(
            {"asset_aliases": [render.alias(a) for a in aliases], "total_entries": total}
        )


class AliasDetailView(PublicView):
    required_permissions: ClassVar = {"GET": [V + "assetalias"]}

    def get(self, request: Request, asset_alias_id: str) -> Response:
        found = selectors.alias_get(alias_id=path_id(asset_alias_id))
        if found is None:
            raise NotFound(f"The Asset Alias with ID: `{asset_alias_id}` was not found")
        return Response(render.alias(found))


class AssetEventListView(PublicView):
    required_permissions: ClassVar = {
        "GET": [V + "assetevent"],
        "POST": ["assets_app.add_assetevent"],
    }

    def get(self, request: Request) -> Response:
        q = parse(EventFilter, request.query_params, lists=("order_by",))
        events, total = page(q.filter_queryset(asset_events_detailed()), q)
        return Response(
            {"asset_events": [render.asset_event(e) for e in events], "total_entries": total}
        )

    def post(self, request: Request) -> Response:
        body = body_parse(CreateEventBody, request)
        name, uri = body.name, body.uri
        if body.asset_id is not None:
            target = selectors.asset_get(asset_id=body.asset_id)
            if target is None:
                raise NotFound(f"Asset with ID: `{body.asset_id}` was not found")
            name, uri = target.name, target.uri
        event = asset_event_create_manual(
            name=name,
            uri=uri,
            extra=body.extra,
            partition_key=body.partition_key,
            actor=Actor.of_request(request, "rest_api"),
        )
        return Response(render.asset_event(selectors.asset_event_detailed_get(event_id=event.pk)))


# --- queued events ----------------------------------------------------------------------------


class QueuedEventsView(PublicView):
    """``GET``/``DELETE`` of the queue rows of an asset, a DAG, or a DAG and an asset."""

    required_permissions: ClassVar = {
        "GET": [V + "assetdagrunqueue"],
        "DELETE": ["assets_app.delete_assetdagrunqueue"],
    }

    def _scope(self, request: Request, kwargs: dict[str, str]) -> dict[str, Any]:
        q = parse(QueuedEventsFilter, request.query_params)
        scope: dict[str, Any] = {"before": q.before_datetime()}
        if "dag_id" in kwargs:
            scope["dag_id"] = path_key(kwargs["dag_id"])
        if "asset_id" in kwargs:
            scope["asset_id"] = path_id(kwargs["asset_id"])
        return scope

    def get(self, request: Request, **kwargs: str) -> Response:
        rows = list(queued_events_query(**self._scope(request, kwargs)))
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
        q = parse(DagFilter, request.query_params, lists=("order_by",))
        dags, total = page(q.filter_queryset(selectors.dags()), q)
        return Response({"dags": [render.dag(d) for d in dags], "total_entries": total})

    def patch(self, request: Request) -> Response:
        """Airflow's bulk patch: the DAGs the filters select (``dag_id_pattern`` required)."""
        q = parse(DagFilter, request.query_params, lists=("order_by",))
        body = _patch_body(request)
        if q.dag_id_pattern is None:
            raise BadRequest("dag_id_pattern is required")
        selected = [d.dag_id for d in page_rows(q.filter_queryset(dag_list()), q)]
        dags_set_paused(
            dag_ids=selected, is_paused=body.is_paused, actor=Actor.of_request(request, "rest_api")
        )
        dags = selectors.dags_by_id(dag_ids=selected)
        return Response({"dags": [render.dag(d) for d in dags], "total_entries": len(dags)})


def _dag(dag_id: str) -> Dag:
    found = selectors.dag_get(dag_id=path_key(dag_id))
    if found is None:
        raise NotFound(f"Dag with id {dag_id} was not found")
    return found


class DagDetailView(PublicView):
    required_permissions: ClassVar = {
        "GET": [V + "dag"],
        "PATCH": [V + "dag", "assets_app.change_dag"],
    }

    def get(self, request: Request, dag_id: str) -> Response:
        return Response(render.dag(_dag(dag_id)))

    def patch(self, request: Request, dag_id: str) -> Response:
        found = _dag(dag_id)
        body = _patch_body(request)
        dags_set_paused(
            dag_ids=[found.dag_id],
            is_paused=body.is_paused,
            actor=Actor.of_request(request, "rest_api"),
        )
        return Response(render.dag(_dag(dag_id)))


class DagDetailsView(PublicView):
    """Airflow's ``get_dag_details``: the DAG with its dates, timeout, params and schedule."""

    required_permissions: ClassVar = {"GET": [V + "dag"]}

    def get(self, request: Request, dag_id: str) -> Response:
        found = _dag(dag_id)
        return Response(
            render.dag_details(
                found,
                active_runs=selectors.dag_active_run_count(dag_id=found.dag_id),
            )
        )


#: What Airflow's ``get_tasks`` sorts by (``-`` for descending); the fields the registry has
#: no notion of sort as their Airflow defaults (all alike).
TASK_ORDER = (
    "task_id", "task_display_name", "owner", "start_date", "end_date", "trigger_rule",
    "depends_on_past", "wait_for_downstream", "retries", "queue", "pool", "pool_slots",
    "execution_timeout", "retry_delay", "retry_exponential_backoff", "priority_weight",
    "weight_rule", "ui_color", "ui_fgcolor", "operator_name",
)  # fmt: skip


class TaskOrderQuery(Query):
    order_by: Text = "task_id"


class TaskListView(PublicView):
    """Airflow's ``get_tasks``: the DAG's tasks as declared, sorted by ``order_by``."""

    required_permissions: ClassVar = {"GET": [V + "dag"]}

    def get(self, request: Request, dag_id: str) -> Response:
        order_by = parse(TaskOrderQuery, request.query_params).order_by
        field = order_by.lstrip("-")
        if field not in TASK_ORDER:
            raise BadRequest(
                f"Ordering with '{field}' is disallowed or the attribute does not exist on the "
                "model"
            )
        found = _dag(dag_id)
        tasks, downstream = selectors.dag_tasks(dag_id=found.dag_id)
        rendered = [render.task(t, dag=found, downstream=downstream[t.task_id]) for t in tasks]

        def key(item: dict[str, Any]) -> tuple[bool, Any]:
            # Airflow's: unset values last; a TimeDelta by its length
            value = item[field]
            if isinstance(value, dict):
                value = (value["days"], value["seconds"], value["microseconds"])
            return value is None, value if value is not None else 0

        rendered.sort(key=key, reverse=order_by.startswith("-"))
        return Response({"tasks": rendered, "total_entries": len(rendered)})


class TaskDetailView(PublicView):
    """Airflow's ``get_task``."""

    required_permissions: ClassVar = {"GET": [V + "dag"]}

    def get(self, request: Request, dag_id: str, task_id: str) -> Response:
        found = _dag(dag_id)
        tasks, downstream = selectors.dag_tasks(dag_id=found.dag_id)
        for t in tasks:
            if t.task_id == path_key(task_id):
                return Response(render.task(t, dag=found, downstream=downstream[t.task_id]))
        raise NotFound(f"Task with id {task_id} was not found")


class DagSourceView(PublicView):
    """Airflow's ``get_dag_source``: the text of the file the DAG was last loaded from (its
    one version: ``version_number`` 1 or none), as JSON or, for ``Accept: text/plain``, as is."""

    required_permissions: ClassVar = {"GET": [V + "dag"]}

    def perform_content_negotiation(
        self, request: Request, force: bool = False
    ) -> tuple[BaseRenderer, str]:
        # errors are JSON; the source's own media type is chosen by ``accepted`` (Airflow's)
        return JSONRenderer(), JSON

    def get(self, request: Request, dag_id: str) -> HttpResponseBase:
        media_type = accepted(request.headers.get("Accept", ANY), offered=(JSON, TEXT))
        version = parse(SourceQuery, request.query_params).version_number
        found = _dag(dag_id)
        code = dag_code_get(found) if version in (None, 1) else None
        if code is None:
            raise NotFound(
                f"The source code of the DAG {found.dag_id}, version_number {version} was not found"
            )
        if media_type == TEXT:
            return HttpResponse(code.source_code, content_type=TEXT)
        return Response(render.dag_source(found, code))


class DagStatsQuery(Query):
    dag_ids: list[Text] = Field(default_factory=list)


class DagStatsView(PublicView):
    """Airflow's ``get_dag_stats``: each DAG's runs counted by state (every state listed),
    the DAGs that have runs, by id."""

    required_permissions: ClassVar = {"GET": [V + "dagrun"]}

    def get(self, request: Request) -> Response:
        q = parse(DagStatsQuery, request.query_params, lists=("dag_ids",))
        counts = dag_run_state_counts(dag_ids=q.dag_ids)
        dags = [render.dag_stats(dag_id, by_state) for dag_id, by_state in counts.items()]
        return Response({"dags": dags, "total_entries": len(dags)})


class DagTagListView(PublicView):
    """Airflow's ``get_dag_tags``: the tags of DAGs that are not stale, by name."""

    required_permissions: ClassVar = {"GET": [V + "dag"]}

    def get(self, request: Request) -> Response:
        q = parse(DagTagFilter, request.query_params, lists=("order_by",))
        names = q.select(dag_tag_names(with_stale=False))
        return Response({"tags": names[q.bounds], "total_entries": len(names)})


# --- DAG runs ---------------------------------------------------------------------------------


def _run(dag_id: str, run_id: str) -> DagRun:
    return dag_run_get(dag_id=path_key(dag_id), run_id=path_key(run_id))


def _trigger(
    dag_id: str,
    body: TriggerBody,
    request: Request,
    *,
    event: str = "trigger_dag_run",
) -> DagRun:
    """``dag_run_trigger`` with the body's fields, for the request's user; a null
    ``logical_date`` stays null, as in Airflow 3 (no data interval, run id
    ``manual__<run_after>``); the body's interval (both ends: ``TriggerBody``) only with a
    logical date, as Airflow."""
    interval = None
    if body.logical_date is not None and body.data_interval_start and body.data_interval_end:
        interval = (body.data_interval_start, body.data_interval_end)
    actor = Actor.of_request(request, "rest_api")
    return dag_run_trigger(
        dag_id=dag_id,
        run_id=body.dag_run_id,
        conf=body.conf,
        logical_date=body.logical_date,
        data_interval=interval,
        run_after=body.run_after,
        partition_key=body.partition_key,
        note=body.note,
        note_user_id=str(request.user.pk),
        actor=actor,
        event=event,
    )


class DagRunListView(PublicView):
    required_permissions: ClassVar = {
        "GET": [V + "dagrun"],
        "POST": [V + "dag", "assets_app.add_dagrun"],
    }

    def post(self, request: Request, dag_id: str) -> Response:
        """Airflow's trigger: a queued manual run."""
        if dag_id == "~" or not selectors.dag_exists(dag_id=path_key(dag_id)):
            raise NotFound(f"DAG with dag_id: '{dag_id}' not found")
        body = body_parse(TriggerBody, request)
        run = _trigger(dag_id, body, request)
        return Response(render.dag_run(run))

    def get(self, request: Request, dag_id: str) -> Response:
        q = parse(DagRunFilter, request.query_params, lists=("run_type", "state", "order_by"))
        if dag_id != "~" and not selectors.dag_exists(dag_id=path_key(dag_id)):
            raise NotFound(f"The DAG with dag_id: `{dag_id}` was not found")
        rows = selectors.dag_runs_of(dag_id=None if dag_id == "~" else dag_id)
        runs, total = page(q.filter_queryset(rows), q)
        return Response({"dag_runs": [render.dag_run(r) for r in runs], "total_entries": total})


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
            actor=Actor.of_request(request, "rest_api"),
        )
        return Response(render.dag_run(_run(dag_id, dag_run_id)))


class DagRunClearView(PublicView):
    required_permissions: ClassVar = {"POST": [V + "dagrun", "assets_app.change_taskinstance"]}

    def post(self, request: Request, dag_id: str, dag_run_id: str) -> Response:
        run = _run(dag_id, dag_run_id)
        body = body_parse(DagRunClearBody, request)
        selected = task_instances_select(
            dag_id=run.dag_id, run_id=run.run_id, only_failed=body.only_failed
        )
        result = task_instances_clear(
            task_instances=selected,
            dry_run=body.dry_run,
            actor=Actor.of_request(request, "rest_api"),
            event="clear_dag_run",
            dag_id=run.dag_id,
            run_id=run.run_id,
            extra={"only_failed": body.only_failed},
        )
        if body.dry_run:
            affected = selectors.task_instances_by_id(
                dag_id=run.dag_id,
                run_id=run.run_id,
                ids=[c.task_instance_id for c in result.cleared],
            )
            return Response(
                {
                    "task_instances": [render.task_instance(t) for t in affected],
                    "total_entries": len(affected),
                }
            )
        return Response(render.dag_run(_run(dag_id, dag_run_id)))


# --- task instances and XComs -----------------------------------------------------------------


class TaskInstanceListView(PublicView):
    required_permissions: ClassVar = {"GET": [V + "taskinstance"]}

    def get(self, request: Request, dag_id: str, dag_run_id: str) -> Response:
        run = _run(dag_id, dag_run_id)
        q = parse(Page, request.query_params)
        rows = selectors.task_instances_in_order(dag_id=run.dag_id, run_id=run.run_id)
        tis, total = page(rows, q)
        return Response(
            {"task_instances": [render.task_instance(t) for t in tis], "total_entries": total}
        )


def _task_instance(dag_id: str, dag_run_id: str, task_id: str) -> TaskInstance:
    run = _run(dag_id, dag_run_id)
    found = selectors.task_instance_get(
        dag_id=run.dag_id, run_id=run.run_id, task_id=path_key(task_id)
    )
    if found is None:
        raise NotFound(
            f"The Task Instance with dag_id: `{dag_id}`, run_id: `{dag_run_id}`, "
            f"task_id: `{task_id}` and map_index: `-1` was not found"
        )
    return found


class TaskInstancePatchQuery(UpdateMaskQuery):
    map_index: int | None = Field(default=None, ge=-1, le=INTEGER_MAX)


def _task_instances_patch(
    request: Request, dag_id: str, dag_run_id: str, task_id: str, map_index: int | None
) -> Response:
    """Airflow's ``patch_task_instance``: mark the task instance (``map_index``; without one,
    every map index of the task) ``new_state`` through ``task_instances_mark``; the task
    instances as they are after, as Airflow's ``TaskInstanceCollectionResponse``."""
    run = _run(dag_id, dag_run_id)
    body = body_parse(TaskInstancePatchBody, request)
    mask = parse(TaskInstancePatchQuery, request.query_params, lists=("update_mask",)).update_mask
    given = body.model_fields_set if mask is None else body.model_fields_set & set(mask)
    refused = [
        name
        for name in (
            "note",
            "include_upstream",
            "include_downstream",
            "include_future",
            "include_past",
        )
        if name in given and getattr(body, name)
    ]
    if refused:
        raise BadRequest(
            f"{', '.join(refused)}: not supported by the registry (it keeps no task instance "
            "notes and marks only the task instances named)"
        )
    selected = selectors.task_instances_of_task(
        dag_id=run.dag_id, run_id=run.run_id, task_id=path_key(task_id), map_index=map_index
    )
    if not selected.exists():
        raise NotFound(
            f"The Task Instance with dag_id: `{dag_id}`, run_id: `{dag_run_id}`, "
            f"task_id: `{task_id}` and map_index: `{-1 if map_index is None else map_index}` "
            "was not found"
        )
    if "new_state" in given and body.new_state is not None:
        task_instances_mark(
            task_instances=selected,
            state=body.new_state,
            actor=Actor.of_request(request, "rest_api"),
        )
    tis = list(selected)
    return Response(
        {"task_instances": [render.task_instance(t) for t in tis], "total_entries": len(tis)}
    )


class TaskInstanceDetailView(PublicView):
    required_permissions: ClassVar = {
        "GET": [V + "taskinstance"],
        "PATCH": [V + "taskinstance", "assets_app.change_taskinstance"],
    }

    def get(self, request: Request, dag_id: str, dag_run_id: str, task_id: str) -> Response:
        found = _task_instance(dag_id, dag_run_id, task_id)
        return Response(render.task_instance(found))

    def patch(self, request: Request, dag_id: str, dag_run_id: str, task_id: str) -> Response:
        query = parse(TaskInstancePatchQuery, request.query_params, lists=("update_mask",))
        return _task_instances_patch(request, dag_id, dag_run_id, task_id, query.map_index)


class MappedTaskInstancesQuery(Page):
    state: list[Text] = Field(default_factory=list)


class MappedTaskInstanceListView(PublicView):
    """Airflow's ``GET …/taskInstances/{task_id}/listMapped``: a mapped task's instances,
    by map index (404 when the task is not mapped)."""

    required_permissions: ClassVar = {"GET": [V + "taskinstance"]}

    def get(self, request: Request, dag_id: str, dag_run_id: str, task_id: str) -> Response:
        run = _run(dag_id, dag_run_id)
        mapped = selectors.task_is_mapped(dag_id=run.dag_id, task_id=path_key(task_id))
        if not mapped:
            raise NotFound(
                f"Task id {task_id} not found"
                if mapped is None
                else f"Task id {task_id} is not mapped"
            )
        q = parse(MappedTaskInstancesQuery, request.query_params, lists=("state",))
        rows = selectors.task_instances_in_order(dag_id=run.dag_id, run_id=run.run_id).filter(
            task_id=task_id
        )
        if q.state:
            rows = rows.filter(state__in=q.state)
        tis, total = page(rows, q)
        return Response(
            {"task_instances": [render.task_instance(t) for t in tis], "total_entries": total}
        )


class MapIndexPath(Query):
    map_index: int


class MappedTaskInstanceDetailView(PublicView):
    """Airflow's ``GET`` and ``PATCH …/taskInstances/{task_id}/{map_index}``."""

    required_permissions: ClassVar = {
        "GET": [V + "taskinstance"],
        "PATCH": [V + "taskinstance", "assets_app.change_taskinstance"],
    }

    def patch(
        self, request: Request, dag_id: str, dag_run_id: str, task_id: str, map_index: str
    ) -> Response:
        index = path_parse(MapIndexPath, {"map_index": map_index}).map_index
        if not -1 <= index <= INTEGER_MAX:
            raise NotFound(f"map_index: `{map_index}` names no task instance")
        return _task_instances_patch(request, dag_id, dag_run_id, task_id, index)

    def get(
        self, request: Request, dag_id: str, dag_run_id: str, task_id: str, map_index: str
    ) -> Response:
        run = _run(dag_id, dag_run_id)
        index = path_parse(MapIndexPath, {"map_index": map_index}).map_index
        found = (
            selectors.task_instance_get(
                dag_id=run.dag_id, run_id=run.run_id, task_id=path_key(task_id), map_index=index
            )
            if -1 <= index <= INTEGER_MAX
            else None
        )
        if found is None:
            raise NotFound(
                f"The Task Instance with dag_id: `{dag_id}`, run_id: `{dag_run_id}`, "
                f"task_id: `{task_id}` and map_index: `{map_index}` was not found"
            )
        return Response(render.task_instance(found))


class TaskInstanceDependenciesView(PublicView):
    """Airflow's ``GET …/taskInstances/{task_id}/dependencies``: what keeps the task instance
    from running. The registry reports the one dependency it checks outside the claim: its
    pool (missing, or fewer slots than it takes), as Airflow's ``Pool Slots Available``."""

    required_permissions: ClassVar = {"GET": [V + "taskinstance"]}

    def get(self, request: Request, dag_id: str, dag_run_id: str, task_id: str) -> Response:
        found = _task_instance(dag_id, dag_run_id, task_id)
        reason = task_instance_waiting_reason(found)
        pool = {"name": "Pool Slots Available", "reason": reason}
        return Response({"dependencies": [] if reason is None else [pool]})


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
        found = selectors.xcom_get(
            dag_id=path_key(dag_id),
            run_id=path_key(dag_run_id),
            task_id=path_key(task_id),
            key=path_key(xcom_key),
            map_index=q.map_index,
        )
        if found is None:
            raise NotFound(f"XCom entry with key: `{xcom_key}` not found")
        # Airflow: the stored (serialized) value as a string unless ``deserialize``; then the
        # native value unless ``stringify``. The registry stores JSON, its own serialization.
        return Response(render.xcom(found, stringify=not q.deserialize or q.stringify))


class XComListView(PublicView):
    """Airflow's ``get_xcom_entries``: XCom entries (without their values) of a task, a run or
    a DAG, ``~`` for all, filtered and paged."""

    required_permissions: ClassVar = {"GET": [V + "xcom"]}

    def get(self, request: Request, dag_id: str, dag_run_id: str, task_id: str) -> Response:
        q = parse(XComFilter, request.query_params, lists=("order_by",))
        rows = selectors.xcom_list(
            dag_id=path_key(dag_id), run_id=path_key(dag_run_id), task_id=path_key(task_id)
        )
        entries, total = page(q.filter_queryset(rows), q)
        return Response(
            {"xcom_entries": [render.xcom_entry(x) for x in entries], "total_entries": total}
        )


# --- import errors ----------------------------------------------------------------------------


class ImportErrorListView(PublicView):
    required_permissions: ClassVar = {"GET": [V + "dagimporterror"]}

    def get(self, request: Request) -> Response:
        q = parse(ImportErrorFilter, request.query_params, lists=("order_by",))
        errors, total = page(q.filter_queryset(import_error_list()), q)
        return Response(
            {"import_errors": [render.import_error(e) for e in errors], "total_entries": total}
        )


class ImportErrorDetailView(PublicView):
    required_permissions: ClassVar = {"GET": [V + "dagimporterror"]}

    def get(self, request: Request, import_error_id: str) -> Response:
        found = selectors.import_error_get(import_error_id=path_id(import_error_id))
        if found is None:
            raise NotFound(
                f"The ImportError with import_error_id: `{import_error_id}` was not found"
            )
        return Response(render.import_error(found))


# --- event logs -------------------------------------------------------------------------------


class EventLogListView(PublicView):
    required_permissions: ClassVar = {"GET": [V + "eventlog"]}

    def get(self, request: Request) -> Response:
        """2 queries: the count and the page."""
        q = parse(EventLogFilter, request.query_params, lists=EventLogFilter.LISTS)
        rows, total = page(q.filter_queryset(event_log_list()), q)
        return Response(
            {"event_logs": [render.event_log(row) for row in rows], "total_entries": total}
        )


class EventLogDetailView(PublicView):
    required_permissions: ClassVar = {"GET": [V + "eventlog"]}

    def get(self, request: Request, event_log_id: str) -> Response:
        found = event_log_get(event_log_id=path_id(event_log_id))
        if found is None:
            raise NotFound(f"The Event Log with id: `{event_log_id}` not found")
        return Response(render.event_log(found))


# --- monitoring -------------------------------------------------------------------------------


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
        database = "healthy" if selectors.metadatabase_is_healthy() else "unhealthy"
        return Response(
            {
                "metadatabase": {"status": database},
                "scheduler": {"status": None, "latest_scheduler_heartbeat": None},
                "triggerer": {"status": None, "latest_triggerer_heartbeat": None},
                "dag_processor": None,
            }
        )
