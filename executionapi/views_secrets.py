"""``/execution/variables/…`` and ``/execution/connections/{id}``: Airflow 3.3.2's routes
(``airflow/api_fastapi/execution_api/routes/variables.py`` and ``connections.py``), same
paths, bodies, status codes and error bodies.

Any valid task token reads (Airflow trusts every worker of a deployment); a write (``PUT``,
``DELETE`` of a variable) also needs the token's task instance to be running, so that a
token whose task is gone or finished writes nothing. The connection read is the one
response that carries a password and an extra, decrypted, to the task that asked.
"""

from __future__ import annotations

import logging

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from assets_app.exceptions import ConnectionNotFoundError, VariableNotFoundError
from assets_app.models import SECRET_ID_LENGTH
from assets_app.selectors.secrets import (
    connection_get,
    connection_secrets,
    variable_get,
    variable_keys,
    variable_value,
)
from assets_app.services.secrets.variables import variable_delete, variable_set
from executionapi.permissions import IsTaskRunner, RunningTaskInstanceWrites
from executionapi.serializers import common
from executionapi.serializers import secrets as secret_s
from executionapi.views import BODY_ERRORS, ERRORS, NOT_FOUND, ExecutionAPIView, _body, _valid

logger = logging.getLogger(__name__)


class WritesNeedRunningTaskInstance(RunningTaskInstanceWrites):
    """Reads: any valid task token. Writes: the token's task instance must be running."""

    message = {
        "reason": "access_denied",
        "message": "The token's task instance is not running, so it may not write variables",
    }


def _storable_key(key: str) -> bool:
    """Whether a variable can be stored under ``key`` (else no lookup is needed: PostgreSQL
    refuses a NUL in a query)."""
    return "\x00" not in key and len(key) <= SECRET_ID_LENGTH


_TEXT_OR_NULL = {"type": "string", "nullable": True, "pattern": common.NO_NUL_PATTERN}
#: ``VariablePostBody``: ``val`` (or, as Airflow also accepts and its client sends, ``value``)
#: is required, ``description`` optional, nothing else.
VARIABLE_POST_BODY = {
    "type": "object",
    "properties": {"val": _TEXT_OR_NULL, "value": _TEXT_OR_NULL, "description": _TEXT_OR_NULL},
    "additionalProperties": False,
    "anyOf": [{"required": ["val"]}, {"required": ["value"]}],
}

KEY_PARAMETER = OpenApiParameter(
    "variable_key", str, OpenApiParameter.PATH, description="May contain slashes"
)


@extend_schema(tags=["Variables"])
class VariableKeysView(ExecutionAPIView):
    """``GET /variables/keys``: the keys, optionally by prefix, a page at a time."""

    permission_classes = [IsTaskRunner]

    @extend_schema(
        operation_id="get_variable_keys",
        summary="Variable keys, optionally filtered by prefix",
        parameters=[secret_s.VariableKeysQuerySerializer],
        responses={200: secret_s.VariableKeysResponseSerializer, **ERRORS},
    )
    def get(self, request: Request) -> Response:
        query = _valid(
            secret_s.VariableKeysQuerySerializer(data=request.query_params.dict()),
            location="query",
        ).validated_data
        keys, total = variable_keys(
            prefix=query.get("prefix"), limit=query["limit"], offset=query["offset"]
        )
        body = {"keys": keys, "total_entries": total}
        return Response(secret_s.VariableKeysResponseSerializer(body).data)


@extend_schema(tags=["Variables"], parameters=[KEY_PARAMETER])
class VariableView(ExecutionAPIView):
    """``/variables/{variable_key}``: read, set, delete one variable."""

    permission_classes = [WritesNeedRunningTaskInstance]

    @extend_schema(
        operation_id="get_variable",
        summary="Get an Airflow Variable",
        responses={200: secret_s.VariableResponseSerializer, **NOT_FOUND, **ERRORS},
    )
    def get(self, request: Request, variable_key: str) -> Response:
        if not _storable_key(variable_key):
            raise VariableNotFoundError(f"Variable with key '{variable_key}' not found")
        variable = variable_get(key=variable_key)
        body = {"key": variable_key, "value": variable_value(variable)}
        return Response(secret_s.VariableResponseSerializer(body).data)

    @extend_schema(
        operation_id="put_variable",
        summary="Set an Airflow Variable",
        request={"application/json": VARIABLE_POST_BODY},
        responses={201: common.MessageSerializer, **BODY_ERRORS, **ERRORS},
    )
    def put(self, request: Request, variable_key: str) -> Response:
        _valid(secret_s.VariableKeyPathSerializer(data=self.kwargs), location="path")
        body = _valid(secret_s.VariablePostBodySerializer(data=_body(request))).validated_data
        variable_set(key=variable_key, value=body["value"], description=body["description"])
        message = {"message": "Variable successfully set"}
        return Response(common.MessageSerializer(message).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        operation_id="delete_variable",
        summary="Delete an Airflow Variable (204 whether or not it existed)",
        responses={204: OpenApiResponse(description="Deleted"), **ERRORS},
    )
    def delete(self, request: Request, variable_key: str) -> Response:
        if _storable_key(variable_key):
            variable_delete(key=variable_key)
        return Response(status=status.HTTP_204_NO_CONTENT)


@extend_schema(tags=["Connections"])
class ConnectionView(ExecutionAPIView):
    """``GET /connections/{connection_id}``: a connection as a task needs it."""

    permission_classes = [IsTaskRunner]

    @extend_schema(
        operation_id="get_connection",
        summary="Get an Airflow connection, its password and extra included",
        responses={200: secret_s.ConnectionResponseSerializer, **NOT_FOUND, **ERRORS},
    )
    def get(self, request: Request, connection_id: str) -> Response:
        if not _storable_key(connection_id):
            raise ConnectionNotFoundError(f"Connection with ID {connection_id} not found")
        connection = connection_get(conn_id=connection_id)
        secrets = connection_secrets(connection)
        body = {
            "conn_id": connection.conn_id,
            "conn_type": connection.conn_type,
            "host": connection.host,
            "schema": connection.schema,
            "login": connection.login,
            "password": secrets.password,
            "port": connection.port,
            "extra": secrets.extra,
        }
        logger.debug("connection %s read by a task", connection.conn_id)
        return Response(secret_s.ConnectionResponseSerializer(body).data)
