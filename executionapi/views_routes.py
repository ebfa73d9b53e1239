"""Execution API reads the SDK makes while building a task's context, poking a sensor or
asking about other tasks: ``/assets/by-alias``,
``/task-instances/{id}/previous-successful-dagrun``, ``/task-reschedules/{id}/start_date``,
``/task-instances/count``, ``states``, ``previous/{dag_id}/{task_id}`` and ``breadcrumbs``
(Airflow 3.3.2's paths and shapes)."""

from __future__ import annotations

import uuid
from collections import defaultdict
from typing import Any, cast

from django.db.models import Q, QuerySet
from django.http import HttpResponseBase, JsonResponse
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response

from assets_app.models import TaskInstance
from executionapi import selectors
from executionapi.serializers import assets as asset_s
from executionapi.serializers import dag_runs as dr_s
from executionapi.serializers.common import name_field
from executionapi.views import (
    ERRORS,
    NOT_FOUND,
    ExecutionAPIView,
    _valid,
    _valid_query,
    json_answer,
)


class AssetsByAliasQuerySerializer(serializers.Serializer[Any]):
    alias_name = name_field()


class PrevSuccessfulDagRunSerializer(serializers.Serializer[Any]):
    data_interval_start = serializers.DateTimeField(allow_null=True)
    data_interval_end = serializers.DateTimeField(allow_null=True)
    start_date = serializers.DateTimeField(allow_null=True)
    end_date = serializers.DateTimeField(allow_null=True)


NO_RUN = dict.fromkeys(PrevSuccessfulDagRunSerializer._declared_fields)


@extend_schema(tags=["Assets"])
class AssetsByAliasView(ExecutionAPIView):
    """``GET /assets/by-alias?alias_name=``: the assets the alias resolved to (``[]`` for an
    unknown alias, as Airflow)."""

    @extend_schema(
        operation_id="get_assets_by_alias",
        parameters=[AssetsByAliasQuerySerializer],
        responses={200: asset_s.AssetResponseSerializer(many=True), **ERRORS},
    )
    def get(self, request: Request) -> Response:
        query = _valid_query(AssetsByAliasQuerySerializer, request)
        assets = selectors.assets_by_alias(alias_name=query.validated_data["alias_name"])
        return Response(asset_s.AssetResponseSerializer(cast(Any, assets), many=True).data)


@extend_schema(tags=["Task Instances"])
class PreviousSuccessfulDagRunView(ExecutionAPIView):
    """``GET /task-instances/{id}/previous-successful-dagrun``: the ``prev_*_success``
    context keys; every field ``null`` when there is no such run."""

    @extend_schema(
        operation_id="get_previous_successful_dagrun",
        responses={200: PrevSuccessfulDagRunSerializer, **ERRORS},
    )
    def get(self, request: Request, task_instance_id: uuid.UUID) -> Response:
        run = selectors.previous_successful_dag_run(task_instance_id=task_instance_id)
        return Response(PrevSuccessfulDagRunSerializer(run if run is not None else NO_RUN).data)


@extend_schema(tags=["Task Reschedules"])
class TaskRescheduleStartDateView(ExecutionAPIView):
    """``GET /task-reschedules/{id}/start_date``: when the try's first rescheduled poke
    started (a JSON date-time), or ``null`` before any reschedule."""

    @extend_schema(
        operation_id="get_start_date",
        responses={
            200: OpenApiResponse(
                {"type": "string", "format": "date-time", "nullable": True},
                description="the first rescheduled poke's start, or null before any",
            ),
            **ERRORS,
        },
    )
    def get(self, request: Request, task_instance_id: uuid.UUID) -> JsonResponse:
        start = selectors.task_reschedule_first_start_date(task_instance_id=task_instance_id)
        value = None if start is None else serializers.DateTimeField().to_representation(start)
        return JsonResponse(value, safe=False)  # ``null`` is a body too (DRF would send none)


# --- the task instances of a DAG, as a task asks for them -------------------------------------


def _group_task_ids(dag_id: str, task_group_id: str) -> list[str]:
    """The declared tasks of the group, else Airflow's 404."""
    members = selectors.dag_task_group_task_ids(dag_id=dag_id, task_group_id=task_group_id)
    if members is None:
        raise NotFound(
            {
                "reason": "not_found",
                "message": f"Task group {task_group_id} not found in DAG {dag_id}",
            }
        )
    return members


def _task_instances(query: dict[str, Any], **overrides: Any) -> QuerySet[TaskInstance]:
    filters = {
        "dag_id": query["dag_id"],
        "map_index": query.get("map_index"),
        "task_ids": query.get("task_ids", ()),
        "logical_dates": query.get("logical_dates", ()),
        "run_ids": query.get("run_ids", ()),
    }
    return selectors.task_instances_of_dag(**{**filters, **overrides})


@extend_schema(tags=["Task Instances"])
class TaskInstanceCountView(ExecutionAPIView):
    """``GET /task-instances/count?dag_id=…``: an integer (``get_ti_count``)."""

    @extend_schema(
        operation_id="get_task_instance_count",
        summary="Get the count of task instances matching the given criteria",
        description=(
            "A `task_group_id` names the tasks whose ids start with `<group id>.`; an "
            "unknown group is a 404."
        ),
        parameters=[dr_s.TaskInstanceCountQuerySerializer],
        responses={200: OpenApiResponse({"type": "integer"}), **NOT_FOUND, **ERRORS},
    )
    def get(self, request: Request) -> Response:
        query = _valid_query(dr_s.TaskInstanceCountQuerySerializer, request).validated_data
        tis = _task_instances(query)
        if query.get("task_group_id"):
            members = _group_task_ids(query["dag_id"], query["task_group_id"])
            pairs = set(
                _task_instances(query, task_ids=members).values_list("task_id", "map_index")
            ) or {(query["task_group_id"], -1)}
            keys = Q()
            for task_id, map_index in pairs:
                keys |= Q(task_id=task_id, map_index=map_index)
            tis = tis.filter(keys)
        tis = selectors.task_instances_with_states(tis, states=query.get("states", ()))
        return Response(tis.count())


@extend_schema(tags=["Task Instances"])
class TaskInstanceStatesView(ExecutionAPIView):
    """``GET /task-instances/states?dag_id=…``: run id → task → state (``get_task_states``)."""

    @extend_schema(
        operation_id="get_task_instance_states",
        summary="Get the states for task instances with the given criteria",
        parameters=[dr_s.TaskInstancesQuerySerializer],
        responses={200: dr_s.TaskStatesResponseSerializer, **NOT_FOUND, **ERRORS},
    )
    def get(self, request: Request) -> Response:
        query = _valid_query(dr_s.TaskInstancesQuerySerializer, request).validated_data
        fields = ("run_id", "task_id", "map_index", "state")
        rows = list(_task_instances(query).values_list(*fields))
        if query.get("task_group_id"):
            members = _group_task_ids(query["dag_id"], query["task_group_id"])
            group = list(_task_instances(query, task_ids=members).values_list(*fields))
            rows = rows + group if query.get("task_ids") else group
        states: dict[str, dict[str, str | None]] = defaultdict(dict)
        for run_id, task_id, map_index, state in rows:
            states[run_id][task_id if map_index < 0 else f"{task_id}_{map_index}"] = state
        return Response(dr_s.TaskStatesResponseSerializer({"task_states": states}).data)


@extend_schema(tags=["Task Instances"])
class PreviousTaskInstanceView(ExecutionAPIView):
    """``GET /task-instances/previous/{dag_id}/{task_id}``: the task's instance in the latest
    earlier run, or ``null`` (``get_previous_ti``)."""

    @extend_schema(
        operation_id="get_previous_task_instance",
        summary="Get the previous task instance matching the given criteria",
        parameters=[dr_s.PreviousTIQuerySerializer],
        responses={
            200: OpenApiResponse(
                dr_s.PreviousTIResponseSerializer, description="The task instance, or null"
            ),
            **ERRORS,
        },
    )
    def get(self, request: Request, dag_id: str, task_id: str) -> HttpResponseBase:
        _valid(dr_s.TaskPathSerializer(data=self.kwargs), location="path")
        query = _valid_query(dr_s.PreviousTIQuerySerializer, request).validated_data
        ti = selectors.task_instance_previous(
            dag_id=dag_id,
            task_id=task_id,
            map_index=query["map_index"],
            logical_date=query.get("logical_date"),
            state=query.get("state"),
        )
        return json_answer(None if ti is None else dr_s.PreviousTIResponseSerializer(ti).data)


@extend_schema(tags=["Task Instances"])
class TaskInstanceBreadcrumbsView(ExecutionAPIView):
    """``GET /task-instances/breadcrumbs?dag_id=…&run_id=…``: the run's finished tasks."""

    @extend_schema(
        operation_id="get_task_instance_breadcrumbs",
        summary="The finished task instances of a run",
        parameters=[dr_s.BreadcrumbsQuerySerializer],
        responses={200: dr_s.TaskBreadcrumbsResponseSerializer, **ERRORS},
    )
    def get(self, request: Request) -> Response:
        query = _valid_query(dr_s.BreadcrumbsQuerySerializer, request).validated_data
        tis = selectors.task_instance_breadcrumbs(dag_id=query["dag_id"], run_id=query["run_id"])
        body = {"breadcrumbs": tis}
        return Response(dr_s.TaskBreadcrumbsResponseSerializer(body).data)
