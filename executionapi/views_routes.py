"""Execution API reads the SDK makes while building a task's context or poking a sensor:
``/assets/by-alias``, ``/task-instances/{id}/previous-successful-dagrun`` and
``/task-reschedules/{id}/start_date`` (Airflow 3.3.2's paths and shapes)."""

from __future__ import annotations

import uuid
from typing import Any, cast

from django.http import JsonResponse
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from executionapi import selectors
from executionapi.serializers import assets as asset_s
from executionapi.serializers.common import name_field
from executionapi.views import ERRORS, ExecutionAPIView, _valid_query


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
