"""``/xcoms/{dag_id}/{run_id}/{task_id}/{key}/slice`` and ``…/item/{offset}``: the reads
behind ``ti.xcom_pull(task_ids=…)`` (the SDK's ``XCom.get_all``, a slice of every map
index) and a mapped task's ``XComArg`` lookups (Airflow 3.3.2's routes and shapes)."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponseBase
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response

from executionapi import selectors
from executionapi.serializers import xcoms as xcom_s
from executionapi.views import (
    ERRORS,
    NOT_FOUND,
    ExecutionAPIView,
    _valid,
    _valid_query,
    json_answer,
)

JSON_VALUE = {"description": "Any JSON value", "nullable": True}


@extend_schema(tags=["XComs"])
class XComSliceView(ExecutionAPIView):
    """``GET …/{key}/slice?start=&stop=&step=``: a JSON list of values."""

    @extend_schema(
        operation_id="get_mapped_xcom_by_slice",
        summary="Get XCom values from a mapped task by sequence slice",
        parameters=[xcom_s.XComSliceQuerySerializer],
        responses={
            200: OpenApiResponse({"type": "array", "items": JSON_VALUE}),
            **ERRORS,
        },
    )
    def get(self, request: Request, dag_id: str, run_id: str, task_id: str, key: str) -> Response:
        path = _valid(xcom_s.XComPathSerializer(data=self.kwargs), location="path")
        query = _valid_query(xcom_s.XComSliceQuerySerializer, request).validated_data
        xcoms = selectors.xcoms_of_task(
            **path.validated_data, include_prior_dates=query["include_prior_dates"]
        )
        values = selectors.xcom_values_slice(
            xcoms, start=query.get("start"), stop=query.get("stop"), step=query.get("step")
        )
        return Response(values)


@extend_schema(tags=["XComs"])
class XComItemView(ExecutionAPIView):
    """``GET …/{key}/item/{offset}``: the value at a position in map-index order."""

    @extend_schema(
        operation_id="get_mapped_xcom_by_index",
        summary="Get a single XCom value from a mapped task by sequence index",
        parameters=[
            OpenApiParameter(
                "offset",
                {
                    "type": "integer",
                    "minimum": -xcom_s.OFFSET_LIMIT,
                    "maximum": xcom_s.OFFSET_LIMIT,
                },
                OpenApiParameter.PATH,
                description="Position in map-index order; negative counts from the end",
            )
        ],
        responses={200: OpenApiResponse(JSON_VALUE), **NOT_FOUND, **ERRORS},
    )
    def get(
        self, request: Request, dag_id: str, run_id: str, task_id: str, key: str, offset: str
    ) -> HttpResponseBase:
        path = _valid(xcom_s.XComItemPathSerializer(data=self.kwargs), location="path")
        address: dict[str, Any] = dict(path.validated_data)
        position = address.pop("offset")
        xcom = selectors.xcom_value_at_offset(selectors.xcoms_of_task(**address), offset=position)
        if xcom is None:
            raise NotFound(
                {
                    "reason": "not_found",
                    "message": (
                        f"XCom with key={key!r} offset={position} not found for task "
                        f"{task_id!r} in DAG run {run_id!r} of {dag_id!r}"
                    ),
                }
            )
        return json_answer(xcom.value)
