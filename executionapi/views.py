"""Execution API views: thin, each parses its input, calls one service or selector, answers.

Every route authenticates a task runner's bearer JWT; routes under
``/task-instances/{id}/`` also require the token's ``sub`` to be ``{id}``.
"""

from __future__ import annotations

import json
import logging
import uuid
from typing import Any

from django.conf import settings
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    PolymorphicProxySerializer,
    extend_schema,
)
from rest_framework import status
from rest_framework.parsers import BaseParser
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from assets_app.services import task_instances as ti_services
from assets_app.services import xcoms as xcom_services
from assets_app.tokens import TokenClaims, token_issue
from executionapi import selectors
from executionapi import serializers as s
from executionapi.authentication import TaskRunnerTokenAuthentication
from executionapi.exceptions import (
    BadRequest,
    PayloadTooLarge,
    RequestValidationError,
    exception_handler,
    validation_errors,
)
from executionapi.permissions import TokenMatchesTaskInstance

logger = logging.getLogger(__name__)

API_VERSION_HEADER = "Airflow-API-Version"
REFRESHED_TOKEN_HEADER = "Refreshed-API-Token"


class JSONBodyParser(BaseParser):
    """JSON bodies, capped at ``DATA_UPLOAD_MAX_MEMORY_SIZE`` bytes (bigger → 413)."""

    media_type = "application/json"

    def parse(self, stream: Any, media_type: Any = None, parser_context: Any = None) -> Any:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        request = (parser_context or {}).get("request")
        if limit is not None and request is not None:
            try:
                declared = int(request.META.get("CONTENT_LENGTH") or 0)
            except ValueError:
                declared = 0
            if declared > limit:
                raise PayloadTooLarge()
        raw = stream.read(limit + 1) if limit is not None else stream.read()
        if limit is not None and len(raw) > limit:
            raise PayloadTooLarge()
        try:
            return json.loads(raw)
        except ValueError as exc:
            from rest_framework.exceptions import ParseError

            raise ParseError(f"JSON decode error: {exc}") from exc


ERRORS = {
    401: OpenApiResponse(s.ErrorResponseSerializer, description="No bearer token"),
    403: OpenApiResponse(s.ErrorResponseSerializer, description="Invalid token or wrong sub"),
    422: OpenApiResponse(s.ValidationErrorResponseSerializer, description="Validation error"),
}
NOT_FOUND = {404: OpenApiResponse(s.ErrorResponseSerializer, description="Not found")}
CONFLICT = {409: OpenApiResponse(s.ErrorResponseSerializer, description="Conflicting state")}


def _validated(serializer_class: type, data: Any, *, location: str = "body", **kwargs: Any) -> Any:
    serializer = serializer_class(data=data, **kwargs)
    if not serializer.is_valid():
        raise RequestValidationError(validation_errors(serializer.errors, location=location))
    return serializer


def _storable_json(value: Any) -> Any:
    """A JSON body to store as is: 422 if it holds U+0000, which the database cannot store."""
    path = s.nul_character_path(value)
    if path is not None:
        raise RequestValidationError(
            [{"loc": ["body", *path], "msg": s.NUL_MESSAGE, "type": "null_characters_not_allowed"}]
        )
    return value


class ExecutionAPIView(APIView):
    """Base: bearer-JWT auth, JSON only, SPEC error shapes, token refresh, version logging."""

    authentication_classes = [TaskRunnerTokenAuthentication]
    permission_classes = [TokenMatchesTaskInstance]
    renderer_classes = [JSONRenderer]
    parser_classes = [JSONBodyParser]

    def get_exception_handler(self) -> Any:
        return exception_handler

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        version = request.headers.get(API_VERSION_HEADER)
        logger.debug(
            "%s %s (Airflow-API-Version %s)", request.method, request.path, version or "latest"
        )
        super().initial(request, *args, **kwargs)

    def finalize_response(
        self, request: Request, response: Response, *args: Any, **kwargs: Any
    ) -> Response:
        response = super().finalize_response(request, response, *args, **kwargs)
        claims = getattr(request, "_auth", None)
        if (
            isinstance(claims, TokenClaims)
            and response.status_code < 400
            and claims.needs_refresh()
        ):
            response[REFRESHED_TOKEN_HEADER] = token_issue(task_instance_id=claims.subject)
        return response


# --- task instances ---------------------------------------------------------------------------

STATE_REQUEST = PolymorphicProxySerializer(
    component_name="TIStatePayload",
    serializers=s.STATE_PAYLOAD_SERIALIZERS,
    resource_type_field_name="state",
)


class TaskInstanceStateView(ExecutionAPIView):
    @extend_schema(
        operation_id="ti_update_state",
        summary="Move a running task instance to a new state",
        description=(
            "The body is chosen by its `state`. A success registers the asset changes in the "
            "same transaction. The stored state repeated → 200 and nothing written; a TI that "
            "is not running → 409 `invalid_state` with `previous_state`."
        ),
        request=STATE_REQUEST,
        responses={
            204: OpenApiResponse(description="State updated"),
            200: OpenApiResponse(s.MessageSerializer, description="Already in that state"),
            413: OpenApiResponse(s.ErrorResponseSerializer, description="Body too large"),
            **NOT_FOUND,
            **CONFLICT,
            **ERRORS,
        },
        tags=["Task Instances"],
    )
    def patch(self, request: Request, task_instance_id: uuid.UUID) -> Response:
        data = request.data
        state = data.get("state") if isinstance(data, dict) else None
        serializer_class = (
            s.STATE_PAYLOAD_SERIALIZERS.get(state) if isinstance(state, str) else None
        )
        if serializer_class is None:
            expected = ", ".join(f"'{name}'" for name in s.STATE_PAYLOAD_SERIALIZERS)
            raise RequestValidationError(
                [
                    {
                        "loc": ["body", "state"],
                        "msg": f"Input tag {state!r} found using 'state' does not match any of "
                        f"the expected tags: {expected}",
                        "type": "union_tag_invalid",
                    }
                ]
            )
        payload = _validated(serializer_class, data).payload()
        outcome = ti_services.task_instance_state_update(
            task_instance_id=task_instance_id, payload=payload
        )
        if outcome == ti_services.StateUpdateOutcome.UNCHANGED:
            return Response(
                {"message": f"Task instance is already in state {payload.state}"},
                status=status.HTTP_200_OK,
            )
        return Response(status=status.HTTP_204_NO_CONTENT)


class TaskInstanceRunView(ExecutionAPIView):
    @extend_schema(
        operation_id="ti_run",
        summary="Mark a queued task instance as running and get its run context",
        request=s.TIEnterRunningPayloadSerializer,
        responses={200: s.TIRunContextSerializer, **NOT_FOUND, **CONFLICT, **ERRORS},
        tags=["Task Instances"],
    )
    def patch(self, request: Request, task_instance_id: uuid.UUID) -> Response:
        run = _validated(s.TIEnterRunningPayloadSerializer, request.data).run_start()
        result = ti_services.task_instance_run_start(task_instance_id=task_instance_id, run=run)
        context = selectors.run_context(
            task_instance=result.task_instance, should_retry=result.should_retry
        )
        return Response(s.TIRunContextSerializer(context).data)


class TaskInstanceHeartbeatView(ExecutionAPIView):
    @extend_schema(
        operation_id="ti_heartbeat",
        summary="Heartbeat from the process running the task instance",
        request=s.TIHeartbeatInfoSerializer,
        responses={204: OpenApiResponse(description="Recorded"), **NOT_FOUND, **CONFLICT, **ERRORS},
        tags=["Task Instances"],
    )
    def put(self, request: Request, task_instance_id: uuid.UUID) -> Response:
        data = _validated(s.TIHeartbeatInfoSerializer, request.data).validated_data
        ti_services.task_instance_heartbeat(
            task_instance_id=task_instance_id, hostname=data["hostname"], pid=data["pid"]
        )
        return Response(status=status.HTTP_204_NO_CONTENT)


class TaskInstanceRenderedFieldsView(ExecutionAPIView):
    @extend_schema(
        operation_id="ti_put_rtif",
        summary="Store the rendered template fields of a task instance",
        request={"application/json": OpenApiTypes.OBJECT},
        responses={201: s.MessageSerializer, **NOT_FOUND, **ERRORS},
        tags=["Task Instances"],
    )
    def put(self, request: Request, task_instance_id: uuid.UUID) -> Response:
        if not isinstance(request.data, dict):
            raise RequestValidationError(
                [{"loc": ["body"], "msg": "Input should be a JSON object", "type": "dict_type"}]
            )
        ti_services.task_instance_rendered_fields_set(
            task_instance_id=task_instance_id, rendered_fields=_storable_json(dict(request.data))
        )
        return Response(
            {"message": "Rendered task instance fields successfully set"},
            status=status.HTTP_201_CREATED,
        )


class TaskInstanceValidateInletsOutletsView(ExecutionAPIView):
    @extend_schema(
        operation_id="ti_validate_inlets_and_outlets",
        summary="Declared Asset inlets/outlets of the task that are not active",
        responses={200: s.InactiveAssetsResponseSerializer, **NOT_FOUND, **ERRORS},
        tags=["Task Instances"],
    )
    def get(self, request: Request, task_instance_id: uuid.UUID) -> Response:
        inactive = selectors.task_instance_inactive_assets(task_instance_id=task_instance_id)
        return Response({"inactive_assets": inactive})


# --- assets and asset events ------------------------------------------------------------------


class AssetByNameView(ExecutionAPIView):
    @extend_schema(
        operation_id="get_asset_by_name",
        summary="The active asset with this name",
        parameters=[OpenApiParameter("name", str, required=True)],
        responses={200: s.AssetResponseSerializer, **NOT_FOUND, **ERRORS},
        tags=["Assets"],
    )
    def get(self, request: Request) -> Response:
        query = _validated(s.AssetByNameQuerySerializer, request.query_params, location="query")
        asset = selectors.active_asset_get(name=query.validated_data["name"])
        return Response(s.AssetResponseSerializer(asset).data)


class AssetByUriView(ExecutionAPIView):
    @extend_schema(
        operation_id="get_asset_by_uri",
        summary="The active asset with this uri",
        parameters=[OpenApiParameter("uri", str, required=True)],
        responses={200: s.AssetResponseSerializer, **NOT_FOUND, **ERRORS},
        tags=["Assets"],
    )
    def get(self, request: Request) -> Response:
        query = _validated(s.AssetByUriQuerySerializer, request.query_params, location="query")
        asset = selectors.active_asset_get(uri=query.validated_data["uri"])
        return Response(s.AssetResponseSerializer(asset).data)


def _event_filters(query: dict[str, Any]) -> dict[str, Any]:
    return {
        "after": query.get("after"),
        "before": query.get("before"),
        "ascending": query.get("ascending", True),
        "limit": query.get("limit"),
    }


def _query_params(request: Request) -> dict[str, Any]:
    """Query parameters, with a '+' that arrived unencoded in a datetime restored."""
    params = {key: request.query_params.get(key) for key in request.query_params}
    for key in ("after", "before"):
        if isinstance(params.get(key), str):
            params[key] = params[key].replace(" ", "+")
    return params


EVENT_FILTER_PARAMETERS = [
    OpenApiParameter("after", OpenApiTypes.DATETIME, description="Inclusive lower bound"),
    OpenApiParameter("before", OpenApiTypes.DATETIME, description="Inclusive upper bound"),
    OpenApiParameter("ascending", bool, description="Oldest first (default true)"),
    OpenApiParameter("limit", int),
]


class AssetEventsByAssetView(ExecutionAPIView):
    @extend_schema(
        operation_id="get_asset_events_by_asset",
        summary="Events of an asset",
        description=(
            "With both name and uri: the asset with that key. With only one of them: the "
            "active asset with that name or uri. Neither → 400."
        ),
        parameters=[
            OpenApiParameter("name", str),
            OpenApiParameter("uri", str),
            *EVENT_FILTER_PARAMETERS,
        ],
        responses={
            200: s.AssetEventsResponseSerializer,
            400: OpenApiResponse(s.ErrorResponseSerializer, description="Neither name nor uri"),
            **ERRORS,
        },
        tags=["Asset Events"],
    )
    def get(self, request: Request) -> Response:
        query = _validated(
            s.AssetEventsByAssetQuerySerializer, _query_params(request), location="query"
        ).validated_data
        name, uri = query.get("name") or None, query.get("uri") or None
        if name is None and uri is None:
            raise BadRequest(
                {"reason": "missing_parameter", "message": "Either name or uri must be provided"}
            )
        if name is None or uri is None:
            key = selectors.active_asset_key(name=name, uri=uri)
            if key is None:
                return Response({"asset_events": []})
            name, uri = key
        events = selectors.asset_event_list(name=name, uri=uri, **_event_filters(query))
        return Response({"asset_events": events})


class AssetEventsByAliasView(ExecutionAPIView):
    @extend_schema(
        operation_id="get_asset_events_by_asset_alias",
        summary="Events emitted through an asset alias",
        parameters=[OpenApiParameter("name", str, required=True), *EVENT_FILTER_PARAMETERS],
        responses={200: s.AssetEventsResponseSerializer, **ERRORS},
        tags=["Asset Events"],
    )
    def get(self, request: Request) -> Response:
        query = _validated(
            s.AssetEventsByAliasQuerySerializer, _query_params(request), location="query"
        ).validated_data
        events = selectors.asset_event_list(alias=query["name"], **_event_filters(query))
        return Response({"asset_events": events})


# --- xcoms ------------------------------------------------------------------------------------

XCOM_PARAMETERS = [
    OpenApiParameter("dag_id", str, OpenApiParameter.PATH),
    OpenApiParameter("run_id", str, OpenApiParameter.PATH, description="Unencoded run id"),
    OpenApiParameter("task_id", str, OpenApiParameter.PATH),
    OpenApiParameter("key", str, OpenApiParameter.PATH),
    OpenApiParameter("map_index", int, description="Default -1 (not mapped)"),
]


class XComView(ExecutionAPIView):
    def _query(self, request: Request) -> dict[str, Any]:
        """The query parameters, once the path parameters are known to fit their columns."""
        _validated(s.XComPathSerializer, self.kwargs, location="path")
        return _validated(
            s.XComQuerySerializer, request.query_params, location="query"
        ).validated_data

    @extend_schema(
        operation_id="get_xcom",
        summary="Read an XCom value",
        parameters=[*XCOM_PARAMETERS, OpenApiParameter("include_prior_dates", bool)],
        responses={200: s.XComResponseSerializer, **NOT_FOUND, **ERRORS},
        tags=["XComs"],
    )
    def get(self, request: Request, dag_id: str, run_id: str, task_id: str, key: str) -> Response:
        query = self._query(request)
        value = xcom_services.xcom_get(
            dag_id=dag_id, run_id=run_id, task_id=task_id, key=key, map_index=query["map_index"]
        )
        return Response({"key": key, "value": value})

    @extend_schema(
        operation_id="set_xcom",
        summary="Store an XCom value (the body is the JSON value)",
        parameters=[
            *XCOM_PARAMETERS,
            OpenApiParameter("mapped_length", int),
            OpenApiParameter("dag_result", bool),
        ],
        request={"application/json": OpenApiTypes.ANY},
        responses={201: s.MessageSerializer, **NOT_FOUND, **ERRORS},
        tags=["XComs"],
    )
    def post(self, request: Request, dag_id: str, run_id: str, task_id: str, key: str) -> Response:
        query = self._query(request)
        xcom_services.xcom_set(
            dag_id=dag_id,
            run_id=run_id,
            task_id=task_id,
            key=key,
            value=_storable_json(request.data),
            map_index=query["map_index"],
        )
        return Response({"message": "XCom successfully set"}, status=status.HTTP_201_CREATED)

    @extend_schema(
        operation_id="delete_xcom",
        summary="Delete an XCom value",
        parameters=XCOM_PARAMETERS,
        responses={200: s.MessageSerializer, **ERRORS},
        tags=["XComs"],
    )
    def delete(
        self, request: Request, dag_id: str, run_id: str, task_id: str, key: str
    ) -> Response:
        query = self._query(request)
        xcom_services.xcom_delete(
            dag_id=dag_id, run_id=run_id, task_id=task_id, key=key, map_index=query["map_index"]
        )
        return Response({"message": "XCom successfully deleted"})

    @extend_schema(exclude=True)
    def head(self, request: Request, dag_id: str, run_id: str, task_id: str, key: str) -> Response:
        count = xcom_services.xcom_count(dag_id=dag_id, run_id=run_id, task_id=task_id, key=key)
        return Response(
            status=status.HTTP_200_OK, headers={"Content-Range": f"map_indexes {count}"}
        )
