"""Execution API views: each action parses its input with a serializer, calls one service or
selector, and renders the answer with an output serializer.

Every route authenticates a task runner's bearer JWT; routes under
``/task-instances/{id}/`` also require the token's ``sub`` to be ``{id}``.
"""

from __future__ import annotations

import itertools
import json
import logging
import re
import uuid
from collections.abc import Callable, Generator, Iterator
from typing import Any, TypedDict, TypeVar, cast

from django.db import DatabaseError
from django.db.models import QuerySet
from django.http import HttpResponseBase, JsonResponse, StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, PolymorphicProxySerializer, extend_schema
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, ParseError, PermissionDenied
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import BaseSerializer, ListField, Serializer
from rest_framework.views import APIView
from rest_framework.viewsets import ViewSetMixin

from assets_app.edge.outage import OutageRetryMixin
from assets_app.edge.parsers import JSONBodyParser
from assets_app.models import AssetEvent
from assets_app.selectors.assets import asset_events_query
from assets_app.selectors.runs import task_instance_token_renewable
from assets_app.services.runs import claims as claim_services
from assets_app.services.runs import state as state_services
from assets_app.services.state import xcoms as xcom_services
from assets_app.tokens import TokenClaims, token_issue
from executionapi import selectors
from executionapi.authentication import TaskRunnerTokenAuthentication
from executionapi.exceptions import (
    BadRequest,
    RequestValidationError,
    exception_handler,
    validation_errors,
)
from executionapi.permissions import TokenMatchesTaskInstance
from executionapi.serializers import assets as asset_s
from executionapi.serializers import common
from executionapi.serializers import task_instances as ti_s
from executionapi.serializers import xcoms as xcom_s
from task_sdk.jsonvalues import MAX_JSON_DEPTH

logger = logging.getLogger(__name__)

API_VERSION_HEADER = "Airflow-API-Version"
#: The newest version of Airflow 3.3.2's execution API, which a request without the header
#: gets (Cadwyn's default there).
LATEST_API_VERSION = "2026-06-30"
_API_VERSION_FORMAT = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
REFRESHED_TOKEN_HEADER = "Refreshed-API-Token"  # noqa: S105 - a name, not a secret


class ExecutionJSONParser(JSONBodyParser):
    """JSON bodies under the edge kit's cap, read as Airflow's execution API reads them.

    ``NaN``, ``Infinity`` and lone surrogates parse, and the field holding them answers a 422
    naming it (``common.json_value_error``); a body nested so deep that the parser gives up
    (Python's recursion limit, ~1,000 levels) is a 422 on the body.
    """

    def decode(self, raw: bytes) -> Any:
        common.REQUEST_BODY_BYTES.set(len(raw))
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise ParseError(f"JSON decode error: {exc}") from exc
        except RecursionError as exc:  # nested far deeper than any field accepts
            raise ParseError(
                f"JSON decode error: nested deeper than {MAX_JSON_DEPTH} levels"
            ) from exc


class UTF8JSONRenderer(JSONRenderer):
    """DRF's JSON as UTF-8; a lone surrogate, which UTF-8 cannot carry (a 422 naming the key
    ``"\\udc00"`` that holds one), is written as the JSON escape ``\\udc00`` instead."""

    def render(
        self, data: Any, accepted_media_type: Any = None, renderer_context: Any = None
    ) -> Any:
        try:
            return super().render(data, accepted_media_type, renderer_context)
        except UnicodeEncodeError:
            text = json.dumps(data, cls=self.encoder_class, ensure_ascii=True, allow_nan=False)
            return text.encode("ascii")


def _body(request: Request) -> Any:
    """The request's JSON body; none at all is a 422 (DRF would read it as ``{}``)."""
    if request.META.get("CONTENT_LENGTH") in (None, "", "0"):
        missing = {"loc": ["body"], "msg": "Field required", "type": "missing"}
        raise RequestValidationError([missing])
    return request.data


def json_answer(data: Any) -> HttpResponseBase:
    """A 200 with ``data`` as its JSON body, ``null`` included (DRF would send no body)."""
    if data is None:
        return JsonResponse(None, safe=False)
    return Response(data)


S = TypeVar("S", bound=BaseSerializer[Any])


def _valid(serializer: S, *, location: str = "body") -> S:
    """The serializer once its data is valid; else a 422 naming every bad field at
    ``location`` (``body``, ``query`` or ``path``)."""
    if not serializer.is_valid():
        raise RequestValidationError(validation_errors(serializer.errors, location=location))
    return serializer


def _valid_query(serializer_class: type[S], request: Request) -> S:
    """The query parameters, once valid; else a 422. A list field takes every value of its
    repeated parameter (``run_ids=a&run_ids=b``), any other field the last one; an empty
    value is a value (``state=`` is no state: a 422), not an omitted parameter."""
    params = request.query_params
    fields: Any = getattr(serializer_class(), "fields", {})
    data = {
        name: params.getlist(name) if isinstance(fields.get(name), ListField) else params[name]
        for name in params
    }
    return _valid(serializer_class(data=data), location="query")


#: What any route may answer before the app sees the request: gunicorn's
#: ``limit_request_line`` (8190 bytes).
GATEWAY_ERRORS: dict[int | tuple[int, str], OpenApiResponse] = {
    (414, "text/html"): OpenApiResponse(
        OpenApiTypes.STR, description="Request line (path and query) longer than accepted"
    ),
}
ERRORS: dict[int | tuple[int, str], OpenApiResponse] = {
    **GATEWAY_ERRORS,
    401: OpenApiResponse(common.ErrorResponseSerializer, description="No bearer token"),
    403: OpenApiResponse(common.ErrorResponseSerializer, description="Invalid token or wrong sub"),
    422: OpenApiResponse(common.ValidationErrorResponseSerializer, description="Validation error"),
    # a path parameter the router does not take (say, a newline) matches no route
    404: OpenApiResponse(common.ErrorResponseSerializer, description="Not found, or no route"),
}
#: What a route taking a JSON body may answer besides: too large, or not JSON.
BODY_ERRORS = {
    413: OpenApiResponse(common.ErrorResponseSerializer, description="Body too large"),
    415: OpenApiResponse(
        common.ErrorResponseSerializer, description="Body not sent as application/json"
    ),
}
NOT_FOUND = {404: OpenApiResponse(common.ErrorResponseSerializer, description="Not found")}
CONFLICT = {409: OpenApiResponse(common.ErrorResponseSerializer, description="Conflicting state")}


class ExecutionAPIView(OutageRetryMixin, APIView):
    """Base: bearer-JWT auth, JSON only, Airflow's error shapes, token refresh, the version
    header; a request is run again while the database is unavailable (``OutageRetryMixin``)."""

    authentication_classes = [TaskRunnerTokenAuthentication]
    permission_classes = [TokenMatchesTaskInstance]
    renderer_classes = [UTF8JSONRenderer]
    parser_classes = [ExecutionJSONParser]

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
        # as Cadwyn in Airflow: every answer names the version asked for, else the newest
        asked = request.headers.get(API_VERSION_HEADER, "")
        response[API_VERSION_HEADER] = (
            asked if _API_VERSION_FORMAT.fullmatch(asked) else LATEST_API_VERSION
        )
        claims = getattr(request, "_auth", None)
        if (
            isinstance(claims, TokenClaims)
            and response.status_code < 400
            and claims.needs_refresh()
            and _renewable(claims.subject)
        ):
            response[REFRESHED_TOKEN_HEADER] = token_issue(task_instance_id=claims.subject)
        return response


def _renewable(task_instance_id: str) -> bool:
    """``task_instance_token_renewable``; ``False`` while the database is unavailable (the
    answer goes out without a new token; the next one near expiry brings it)."""
    try:
        return task_instance_token_renewable(task_instance_id)
    except DatabaseError:
        return False


class ExecutionAPIViewSet(ViewSetMixin, ExecutionAPIView):
    """Base of the viewsets: the routes of one resource, each an ``@action``."""


# --- task instances ---------------------------------------------------------------------------

STATE_REQUEST = PolymorphicProxySerializer(
    component_name="TIStatePayload",
    serializers=dict(ti_s.STATE_PAYLOAD_SERIALIZERS),
    resource_type_field_name="state",
)


@extend_schema(tags=["Task Instances"])
class TaskInstanceViewSet(ExecutionAPIViewSet):
    """``/task-instances/{id}/…``: one task instance's life, as its runner reports it."""

    lookup_url_kwarg = "task_instance_id"
    lookup_value_converter = "uuid"  # a non-UUID id matches no route: the JSON 404

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
            200: OpenApiResponse(common.MessageSerializer, description="Already in that state"),
            **BODY_ERRORS,
            **NOT_FOUND,
            **CONFLICT,
            **ERRORS,
        },
    )
    @action(detail=True, methods=["patch"])
    def state(self, request: Request, task_instance_id: uuid.UUID) -> Response:
        payload = _valid(ti_s.state_payload_serializer(_body(request))).payload()
        outcome = state_services.task_instance_state_update(
            task_instance_id=task_instance_id, payload=payload
        )
        if outcome == state_services.StateUpdateOutcome.UNCHANGED:
            message = {"message": f"Task instance is already in state {payload.state}"}
            return Response(common.MessageSerializer(message).data, status=status.HTTP_200_OK)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        operation_id="ti_skip_downstream",
        summary="Skip the given tasks of the task instance's run (a branch's or short-circuit's)",
        description=(
            "Each task (a task id, or `[task_id, map_index]`) of the same run becomes `skipped` "
            "unless it is running or already succeeded or failed (Airflow's rule); the run's "
            "next tasks are decided when the calling task instance finishes."
        ),
        request=ti_s.TISkippedDownstreamTasksSerializer,
        responses={
            204: OpenApiResponse(description="Skipped"),
            **BODY_ERRORS,
            **NOT_FOUND,
            **ERRORS,
        },
    )
    @action(detail=True, methods=["patch"], url_path="skip-downstream")
    def skip_downstream(self, request: Request, task_instance_id: uuid.UUID) -> Response:
        data = _valid(ti_s.TISkippedDownstreamTasksSerializer(data=_body(request))).validated_data
        state_services.task_instances_skip(task_instance_id=task_instance_id, tasks=data["tasks"])
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        operation_id="ti_run",
        summary="Mark a queued task instance as running and get its run context",
        request=ti_s.TIEnterRunningPayloadSerializer,
        responses={
            200: ti_s.TIRunContextSerializer,
            **BODY_ERRORS,
            **NOT_FOUND,
            **CONFLICT,
            **ERRORS,
        },
    )
    @action(detail=True, methods=["patch"])
    def run(self, request: Request, task_instance_id: uuid.UUID) -> Response:
        run = _valid(ti_s.TIEnterRunningPayloadSerializer(data=_body(request))).run_start()
        result = claim_services.task_instance_run_start(task_instance_id=task_instance_id, run=run)
        selectors.dag_run_consumed_events_prefetch(dag_run=result.task_instance.dag_run)
        return Response(ti_s.TIRunContextSerializer(result).data)

    @extend_schema(
        operation_id="ti_heartbeat",
        summary="Heartbeat from the process running the task instance",
        request=ti_s.TIHeartbeatInfoSerializer,
        responses={
            204: OpenApiResponse(description="Recorded"),
            **BODY_ERRORS,
            **NOT_FOUND,
            **CONFLICT,
            **ERRORS,
        },
    )
    @action(detail=True, methods=["put"])
    def heartbeat(self, request: Request, task_instance_id: uuid.UUID) -> Response:
        data = _valid(ti_s.TIHeartbeatInfoSerializer(data=_body(request))).validated_data
        claim_services.task_instance_heartbeat(
            task_instance_id=task_instance_id, hostname=data["hostname"], pid=data["pid"]
        )
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        operation_id="ti_put_rtif",
        summary="Store the rendered template fields of a task instance",
        request={"application/json": OpenApiTypes.OBJECT},
        responses={201: common.MessageSerializer, **BODY_ERRORS, **NOT_FOUND, **ERRORS},
    )
    @action(detail=True, methods=["put"])
    def rtif(self, request: Request, task_instance_id: uuid.UUID) -> Response:
        fields = common.StorableJSONField(object_only=True).run_validation(_body(request))
        state_services.task_instance_rendered_fields_set(
            task_instance_id=task_instance_id, rendered_fields=dict(fields)
        )
        message = {"message": "Rendered task instance fields successfully set"}
        return Response(common.MessageSerializer(message).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        operation_id="ti_patch_rendered_map_index",
        summary="Store a mapped task instance's label (its rendered map_index_template)",
        request={"application/json": {"type": "string", "minLength": 1, "maxLength": 250}},
        responses={
            204: OpenApiResponse(description="Stored"),
            **BODY_ERRORS,
            **NOT_FOUND,
            **ERRORS,
        },
    )
    @action(detail=True, methods=["patch"], url_path="rendered-map-index")
    def rendered_map_index(self, request: Request, task_instance_id: uuid.UUID) -> Response:
        label = common.StrictStringField(max_length=250).run_validation(_body(request))
        state_services.task_instance_rendered_map_index_set(
            task_instance_id=task_instance_id, rendered_map_index=str(label)
        )
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        operation_id="ti_validate_inlets_and_outlets",
        summary="Declared Asset inlets/outlets of the task that are not active",
        responses={200: ti_s.InactiveAssetsResponseSerializer, **NOT_FOUND, **ERRORS},
    )
    @action(detail=True, methods=["get"], url_path="validate-inlets-and-outlets")
    def validate_inlets_and_outlets(
        self, request: Request, task_instance_id: uuid.UUID
    ) -> Response:
        inactive = selectors.task_instance_inactive_assets(task_instance_id=task_instance_id)
        return Response(ti_s.InactiveAssetsResponseSerializer({"inactive_assets": inactive}).data)


# --- assets and asset events ------------------------------------------------------------------


def _active_asset_action(
    field: str, query_serializer: type[Serializer[Any]]
) -> Callable[..., Response]:
    """``GET /assets/by-<field>?<field>=``: the active asset with that name (or uri)."""

    def lookup(self: AssetViewSet, request: Request) -> Response:
        query = _valid(query_serializer(data=request.query_params), location="query")
        asset = selectors.active_asset_get(**query.validated_data)
        return Response(asset_s.AssetResponseSerializer(asset).data)

    lookup.__name__ = f"by_{field}"
    documented = extend_schema(
        operation_id=f"get_asset_by_{field}",
        summary=f"The active asset with this {field}",
        parameters=[query_serializer],
        responses={200: asset_s.AssetResponseSerializer, **NOT_FOUND, **ERRORS},
    )
    return documented(action(detail=False, methods=["get"], url_path=f"by-{field}")(lookup))


@extend_schema(tags=["Assets"])
class AssetViewSet(ExecutionAPIViewSet):
    """``/assets/…``: the active asset with a name or a uri."""

    by_name = _active_asset_action("name", asset_s.AssetByNameQuerySerializer)
    by_uri = _active_asset_action("uri", asset_s.AssetByUriQuerySerializer)


def asset_events_response(events: QuerySet[AssetEvent]) -> HttpResponseBase:
    """``{"asset_events": [...]}``, read and rendered a page at a time.

    The first page is read here, so that a failing query is answered as an error; when it
    holds every event the answer is sent whole, else it is streamed page by page (chunked),
    so that the worker holds one page of events, never all of them.
    """
    pages = selectors.asset_events_pages(events)
    first = next(pages)
    if len(first) < selectors.ASSET_EVENTS_PAGE:
        pages.close()
        return Response(asset_s.AssetEventsResponseSerializer({"asset_events": first}).data)
    return StreamingHttpResponse(_rendered_pages(first, pages), content_type="application/json")


def _rendered_pages(first: list[AssetEvent], rest: Generator[list[AssetEvent]]) -> Iterator[bytes]:
    renderer = UTF8JSONRenderer()
    yield b'{"asset_events":['
    separator = b""
    for page in itertools.chain([first], rest):
        if page:
            serializer = asset_s.AssetEventResponseSerializer(cast(Any, page), many=True)
            items = renderer.render(serializer.data)
            yield separator + items[1:-1]  # the items without the list's brackets
            separator = b","
    yield b"]}"


@extend_schema(tags=["Asset Events"])
class AssetEventViewSet(ExecutionAPIViewSet):
    """``/asset-events/…``: the events of an asset, or emitted through an alias."""

    @extend_schema(
        operation_id="get_asset_events_by_asset",
        summary="Events of an asset",
        description=(
            "With both name and uri: the asset with that key. With only one of them: the "
            "active asset with that name or uri. Neither → 400."
        ),
        parameters=[asset_s.AssetEventsByAssetQuerySerializer],
        responses={
            200: asset_s.AssetEventsResponseSerializer,
            400: OpenApiResponse(
                common.ErrorResponseSerializer, description="Neither name nor uri"
            ),
            **ERRORS,
        },
    )
    @action(detail=False, methods=["get"], url_path="by-asset")
    def by_asset(self, request: Request) -> HttpResponseBase:
        query = _valid_query(asset_s.AssetEventsByAssetQuerySerializer, request)
        name = query.validated_data.get("name") or None
        uri = query.validated_data.get("uri") or None
        if name is None and uri is None:
            raise BadRequest(
                {"reason": "missing_parameter", "message": "Either name or uri must be provided"}
            )
        events = selectors.asset_events_by_asset(name=name, uri=uri, **query.filters())
        return asset_events_response(events)

    @extend_schema(
        operation_id="get_asset_events_by_asset_alias",
        summary="Events emitted through an asset alias",
        parameters=[asset_s.AssetEventsByAliasQuerySerializer],
        responses={200: asset_s.AssetEventsResponseSerializer, **ERRORS},
    )
    @action(detail=False, methods=["get"], url_path="by-asset-alias")
    def by_asset_alias(self, request: Request) -> HttpResponseBase:
        query = _valid_query(asset_s.AssetEventsByAliasQuerySerializer, request)
        events = asset_events_query(alias=query.validated_data["name"], **query.filters())
        return asset_events_response(events)


# --- xcoms ------------------------------------------------------------------------------------


class XComAddress(TypedDict):
    """Which XCom value a request names: the keyword arguments of the XCom services."""

    dag_id: str
    run_id: str
    task_id: str
    key: str
    map_index: int


@extend_schema(tags=["XComs"])
class XComView(ExecutionAPIView):
    """``/xcoms/{dag_id}/{run_id}/{task_id}/{key}``: a plain view, its ``run_id`` arriving
    unencoded (``manual__2026-01-01T00:00:00+00:00``)."""

    def _writable_xcom(self, query_serializer: type[xcom_s.XComQuerySerializer]) -> XComAddress:
        """The XCom the request names, once the token's task instance is the one that
        pushes it and is running; else a 403 ``access_denied``."""
        xcom = self._xcom(query_serializer)
        refusal = selectors.xcom_write_refusal(
            task_instance_id=cast(Any, self.request.user).task_instance_id,
            dag_id=xcom["dag_id"],
            run_id=xcom["run_id"],
            task_id=xcom["task_id"],
            map_index=xcom["map_index"],
        )
        if refusal is not None:
            raise PermissionDenied({"reason": "access_denied", "message": refusal})
        return xcom

    def _xcom(self, query_serializer: type[xcom_s.XComQuerySerializer]) -> XComAddress:
        """The XCom value the request names, once the path parameters are known to fit their
        columns and the query parameters (``query_serializer``) are valid."""
        path = _valid(xcom_s.XComPathSerializer(data=self.kwargs), location="path")
        query = _valid_query(query_serializer, self.request)
        return XComAddress(
            dag_id=path.validated_data["dag_id"],
            run_id=path.validated_data["run_id"],
            task_id=path.validated_data["task_id"],
            key=path.validated_data["key"],
            map_index=query.validated_data["map_index"],
        )

    @extend_schema(
        operation_id="get_xcom",
        summary="Read an XCom value",
        description=(
            "With `offset`, the non-null value at that position in map-index order "
            "(negative: from the end) instead of the one at `map_index`; with "
            "`include_prior_dates`, the newest of the DAG's runs up to this one."
        ),
        parameters=[xcom_s.XComGetQuerySerializer],
        responses={200: xcom_s.XComResponseSerializer, **NOT_FOUND, **ERRORS},
    )
    def get(self, request: Request, dag_id: str, run_id: str, task_id: str, key: str) -> Response:
        path = _valid(xcom_s.XComPathSerializer(data=self.kwargs), location="path")
        query = _valid_query(xcom_s.XComGetQuerySerializer, request).validated_data
        xcoms = selectors.xcoms_of_task(
            **path.validated_data, include_prior_dates=query["include_prior_dates"]
        )
        offset = query.get("offset")
        if offset is not None:
            xcom = selectors.xcom_value_at_offset(xcoms.filter(value__isnull=False), offset=offset)
            where = f"offset={offset}"
        else:
            xcom = xcoms.filter(map_index=query["map_index"]).only("value").first()
            where = f"map_index={query['map_index']}"
        if xcom is None:
            message = (
                f"XCom with key={key!r} {where} not found for task {task_id!r} in DAG run "
                f"{run_id!r} of {dag_id!r}"
            )
            raise NotFound({"reason": "not_found", "message": message})
        return Response(xcom_s.XComResponseSerializer({"key": key, "value": xcom.value}).data)

    @extend_schema(
        operation_id="set_xcom",
        summary="Store an XCom value (the body is the JSON value)",
        parameters=[xcom_s.XComSetQuerySerializer],
        request={"application/json": OpenApiTypes.ANY},
        responses={201: common.MessageSerializer, **BODY_ERRORS, **NOT_FOUND, **ERRORS},
    )
    def post(self, request: Request, dag_id: str, run_id: str, task_id: str, key: str) -> Response:
        xcom = self._writable_xcom(xcom_s.XComSetQuerySerializer)
        mapped_length = _valid_query(xcom_s.XComSetQuerySerializer, request).validated_data.get(
            "mapped_length"
        )
        value = common.StorableJSONField().run_validation(_body(request))
        xcom_services.xcom_set(**xcom, value=value, mapped_length=mapped_length)
        message = {"message": "XCom successfully set"}
        return Response(common.MessageSerializer(message).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        operation_id="delete_xcom",
        summary="Delete an XCom value",
        parameters=[xcom_s.XComQuerySerializer],
        responses={200: common.MessageSerializer, **ERRORS},
    )
    def delete(
        self, request: Request, dag_id: str, run_id: str, task_id: str, key: str
    ) -> Response:
        xcom_services.xcom_delete(**self._writable_xcom(xcom_s.XComQuerySerializer))
        return Response(common.MessageSerializer({"message": "XCom successfully deleted"}).data)

    @extend_schema(exclude=True)
    def head(self, request: Request, dag_id: str, run_id: str, task_id: str, key: str) -> Response:
        path = _valid(xcom_s.XComPathSerializer(data=self.kwargs), location="path")
        count = xcom_services.xcom_count(**path.validated_data)
        return Response(
            status=status.HTTP_200_OK, headers={"Content-Range": f"map_indexes {count}"}
        )
