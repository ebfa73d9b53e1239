"""``/execution/store/ti/…`` and ``/execution/store/asset/…``: Airflow 3.3.2's task and asset
state store routes (``airflow/api_fastapi/execution_api/routes/task_state_store.py`` and
``asset_state_store.py``), same paths, bodies, status codes and error bodies.

- ``/store/ti/{task_instance_id}/…`` needs the token to be that task instance's, for reads
  too (Airflow's ``ti:self`` scope); a write (``PUT``, ``DELETE``) also needs it to be
  running, so that a token whose task is gone or finished writes nothing.
- ``/store/asset/…``: any valid task token reads (Airflow trusts every worker of a
  deployment); a write needs the token's task instance to be running. An asset is the active
  one with that name (or uri): an unknown one is Airflow's 404.
"""

from __future__ import annotations

import uuid
from typing import Any, cast

from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
)
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import Serializer
from rest_framework.views import APIView

from assets_app.models import TaskInstance, TaskInstanceState
from assets_app.services.state import state_stores
from executionapi.permissions import RunningTaskInstanceWrites, TokenMatchesTaskInstance
from executionapi.serializers import state_stores as store_s
from executionapi.views import (
    BODY_ERRORS,
    ERRORS,
    NOT_FOUND,
    ExecutionAPIView,
    _body,
    _valid,
    _valid_query,
)

READS = ("GET", "HEAD", "OPTIONS")
NO_CONTENT = {204: OpenApiResponse(description="Done (also when there was nothing to delete)")}


class OwnRunningTaskStateWrites(TokenMatchesTaskInstance):
    """Every method: the token is the path's task instance's (Airflow's ``ti:self``).
    Writes: that task instance exists and is running."""

    def has_permission(self, request: Request, view: Any) -> bool:
        if not super().has_permission(request, view):
            return False
        if request.method in READS:
            return True
        running = TaskInstance.objects.filter(
            pk=view.kwargs["task_instance_id"], state=TaskInstanceState.RUNNING
        ).exists()
        if not running:
            self.message = {
                "reason": "access_denied",
                "message": "The token's task instance is not running, so it may not write "
                "its task state store",
            }
        return running


class RunningAssetStateWrites(RunningTaskInstanceWrites):
    """Reads: any valid task token. Writes: the token's task instance must be running."""

    message = {
        "reason": "access_denied",
        "message": "The token's task instance is not running, so it may not write an asset's "
        "state store",
    }


def _key(view: ExecutionAPIView) -> str:
    """The ``{key:path}`` path parameter, once it fits its column; else a 422."""
    path = _valid(store_s.StateKeyPathSerializer(data={"key": view.kwargs["key"]}), location="path")
    key: str = path.validated_data["key"]
    return key


def _value_answer(value: Any) -> Response:
    return Response(store_s.StateStoreResponseSerializer({"value": value}).data)


#: A key holding a line break matches no route (as in Airflow, whose ``{key:path}`` stops at
#: one): the JSON 404 of an unknown path, declared on every method.
TASK_KEY = OpenApiParameter(
    "key", str, OpenApiParameter.PATH, description="May contain slashes (percent-encoded)"
)


@extend_schema(tags=["Task State Store"], parameters=[TASK_KEY])
class TaskStateView(ExecutionAPIView):
    """``/store/ti/{task_instance_id}/{key}``: one key of the task instance's store, which
    every try of it shares."""

    permission_classes = [OwnRunningTaskStateWrites]

    @extend_schema(
        operation_id="get_task_state_store",
        summary="Get value for a task state store key",
        responses={200: store_s.StateStoreResponseSerializer, **NOT_FOUND, **ERRORS},
    )
    def get(self, request: Request, task_instance_id: uuid.UUID, key: str) -> Response:
        value = state_stores.task_state_get(task_instance_id=task_instance_id, key=_key(self))
        return _value_answer(value)

    @extend_schema(
        operation_id="set_task_state_store",
        summary="Set a task state store key, creating or updating the row",
        request=store_s.TaskStatePutBodySerializer,
        responses={
            204: OpenApiResponse(description="Stored"),
            **BODY_ERRORS,
            **NOT_FOUND,
            **ERRORS,
        },
    )
    def put(self, request: Request, task_instance_id: uuid.UUID, key: str) -> Response:
        stored_key = _key(self)
        body = _valid(store_s.TaskStatePutBodySerializer(data=_body(request))).validated_data
        state_stores.task_state_set(
            task_instance_id=task_instance_id,
            key=stored_key,
            value=body["value"],
            expires_at=body["expires_at"],
        )
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        operation_id="delete_task_state_store",
        summary="Delete a single task state store key",
        responses={**NO_CONTENT, **NOT_FOUND, **ERRORS},
    )
    def delete(self, request: Request, task_instance_id: uuid.UUID, key: str) -> Response:
        state_stores.task_state_delete(task_instance_id=task_instance_id, key=_key(self))
        return Response(status=status.HTTP_204_NO_CONTENT)


@extend_schema(tags=["Task State Store"])
class TaskStateClearView(ExecutionAPIView):
    """``DELETE /store/ti/{task_instance_id}``: every key of the task instance's store."""

    permission_classes = [OwnRunningTaskStateWrites]

    @extend_schema(
        operation_id="clear_task_state_store",
        summary="Delete all task state store keys for this task instance",
        responses={**NO_CONTENT, **ERRORS},
    )
    def delete(self, request: Request, task_instance_id: uuid.UUID) -> Response:
        state_stores.task_state_clear(task_instance_id=task_instance_id)
        return Response(status=status.HTTP_204_NO_CONTENT)


# --- asset state store ------------------------------------------------------------------------


class AssetStateValueView(ExecutionAPIView):
    """``/store/asset/by-<field>/value?<field>=&key=``: one key of an active asset's store
    (a subclass per field: ``name`` or ``uri``)."""

    permission_classes = [RunningAssetStateWrites]
    query_serializer: type[Serializer[Any]] = store_s.AssetStateByNameQuerySerializer

    def _query(self) -> dict[str, Any]:
        data: dict[str, Any] = _valid_query(self.query_serializer, self.request).validated_data
        return data

    def get(self, request: Request) -> Response:
        query = self._query()
        return _value_answer(state_stores.asset_state_get(**query))

    def put(self, request: Request) -> Response:
        query = self._query()
        body = _valid(store_s.AssetStatePutBodySerializer(data=_body(request))).validated_data
        state_stores.asset_state_set(
            **query,
            value=body["value"],
            writer_task_instance_id=cast(Any, request.user).task_instance_id,
        )
        return Response(status=status.HTTP_204_NO_CONTENT)

    def delete(self, request: Request) -> Response:
        state_stores.asset_state_delete(**self._query())
        return Response(status=status.HTTP_204_NO_CONTENT)


class AssetStateClearView(ExecutionAPIView):
    """``DELETE /store/asset/by-<field>/clear?<field>=``: every key of an active asset's
    store."""

    permission_classes = [RunningAssetStateWrites]
    query_serializer: type[Serializer[Any]] = store_s.AssetStateClearByNameQuerySerializer

    def delete(self, request: Request) -> Response:
        query = _valid_query(self.query_serializer, request).validated_data
        state_stores.asset_state_clear(**query)
        return Response(status=status.HTTP_204_NO_CONTENT)


def _asset_state_views(field: str, label: str) -> tuple[type[APIView], type[APIView]]:
    """The value view and the clear view of the asset store addressed by ``field`` (``name``
    or ``uri``, ``label`` in the schema's summaries): Airflow's operation ids and summaries."""
    query = getattr(store_s, f"AssetStateBy{field.title()}QuerySerializer")
    clear_query = getattr(store_s, f"AssetStateClearBy{field.title()}QuerySerializer")
    value_view = extend_schema_view(
        get=extend_schema(
            operation_id=f"get_asset_state_store_by_{field}",
            summary=f"Get an asset state store value by asset {label}",
            parameters=[query],
            responses={200: store_s.StateStoreResponseSerializer, **NOT_FOUND, **ERRORS},
        ),
        put=extend_schema(
            operation_id=f"set_asset_state_store_by_{field}",
            summary=f"Set an asset state store value by asset {label}",
            parameters=[query],
            request=store_s.AssetStatePutBodySerializer,
            responses={
                204: OpenApiResponse(description="Stored"),
                **BODY_ERRORS,
                **NOT_FOUND,
                **ERRORS,
            },
        ),
        delete=extend_schema(
            operation_id=f"delete_asset_state_store_by_{field}",
            summary=f"Delete a single asset state store key by asset {label}",
            parameters=[query],
            responses={**NO_CONTENT, **NOT_FOUND, **ERRORS},
        ),
    )(
        extend_schema(tags=["Asset State Store"])(
            type(
                f"AssetStateBy{field.title()}View",
                (AssetStateValueView,),
                {"query_serializer": query, "__module__": __name__},
            )
        )
    )
    clear_view = extend_schema_view(
        delete=extend_schema(
            operation_id=f"clear_asset_state_store_by_{field}",
            summary=f"Delete all state store keys for an asset by asset {label}",
            parameters=[clear_query],
            responses={**NO_CONTENT, **NOT_FOUND, **ERRORS},
        ),
    )(
        extend_schema(tags=["Asset State Store"])(
            type(
                f"AssetStateClearBy{field.title()}View",
                (AssetStateClearView,),
                {"query_serializer": clear_query, "__module__": __name__},
            )
        )
    )
    return value_view, clear_view


AssetStateByNameView, AssetStateClearByNameView = _asset_state_views("name", "name")
AssetStateByUriView, AssetStateClearByUriView = _asset_state_views("uri", "URI")
