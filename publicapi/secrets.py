"""``/api/v2/variables`` and ``/api/v2/connections`` (Airflow's ``variables.py`` and
``connections.py`` routes): list, get, create, patch, delete, over the same selectors and
services as ``/api/v1/`` (``assets_app.selectors.secrets``,
``assets_app.services.secrets.variables`` and ``.connections``).

Secrets stay write-only: a connection's ``password`` reads back ``***`` (``null`` when none is
stored), its ``extra`` with each sensitive key's value ``***``, a variable's value ``***``
under a sensitive key (``assets_app.masking``); a ``***`` sent back by a patch keeps what is
stored. Values are decrypted only to be masked, never logged.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, ClassVar

from pydantic import Field, JsonValue, field_validator
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from assets_app.exceptions import (
    ConnectionExistsError,
    ConnectionNotFoundError,
    VariableExistsError,
    VariableNotFoundError,
)
from assets_app.models import Connection, Variable
from assets_app.selectors.secrets import (
    connection_get,
    connection_list,
    connection_masked_extra,
    connection_masked_password,
    variable_get,
    variable_list,
    variable_masked_value,
)
from assets_app.services.audit import Actor
from assets_app.services.inputs import KEEP
from assets_app.services.secrets.connections import (
    ConnectionFields,
    connection_create,
    connection_delete,
    connection_update,
)
from assets_app.services.secrets.variables import (
    variable_create,
    variable_delete,
    variable_set,
    variable_update_description,
)
from publicapi.base import PublicView, page, path_key
from publicapi.exceptions import BadRequest, Conflict, NotFound
from publicapi.filters import ConnectionFilter, VariableFilter
from publicapi.params import Body, Key, Text, UpdateMaskQuery, body_parse
from publicapi.params import query_parse as parse

A = "assets_app."


def _team_name_refused(team_name: str | None) -> str | None:
    """Airflow's ``validate_team_name`` with ``[core] multi_team`` off, the registry's only
    mode."""
    if team_name is not None:
        raise ValueError(
            "team_name cannot be set when multi_team mode is disabled. "
            "Please contact your administrator."
        )
    return team_name


def _given(body: Body, request: Request, *, immutable: str) -> set[str]:
    """The body's fields a patch writes: those sent, narrowed to ``update_mask`` if given
    (Airflow's 400 when the mask names the immutable key)."""
    mask = parse(UpdateMaskQuery, request.query_params, lists=("update_mask",)).update_mask
    if mask is None:
        return set(body.model_fields_set) - {immutable}
    if immutable in mask:
        raise BadRequest(
            "Update not allowed: the following fields are immutable and cannot be modified: "
            f"{{'{immutable}'}}"
        )
    return set(body.model_fields_set) & set(mask)


# --- variables --------------------------------------------------------------------------------


def render_variable(row: Variable) -> dict[str, Any]:
    """Airflow's ``VariableResponse``."""
    return {
        "key": row.key,
        "value": variable_masked_value(row),
        "description": row.description,
        "is_encrypted": row.is_encrypted,
        "team_name": None,
    }


class VariableBody(Body):
    """Airflow's ``VariableBody``: a value that is no string is stored as its JSON text."""

    key: Key
    value: JsonValue
    description: Text | None = None
    team_name: Annotated[Text, Field(max_length=50)] | None = None

    _team = field_validator("team_name")(_team_name_refused)

    def value_text(self) -> str:
        # indent=2 as Airflow's ``Variable.set(serialize_json=True)``
        return self.value if isinstance(self.value, str) else json.dumps(self.value, indent=2)


def _variable(key: str) -> Variable:
    try:
        return variable_get(key=path_key(key))
    except VariableNotFoundError as exc:
        raise NotFound(f"The Variable with key: `{key}` was not found") from exc


class VariableListView(PublicView):
    required_permissions: ClassVar = {
        "GET": [A + "view_variable"],
        "POST": [A + "add_variable"],
    }

    def get(self, request: Request) -> Response:
        q = parse(VariableFilter, request.query_params, lists=("order_by",))
        variables, total = page(q.filter_queryset(variable_list()), q)
        return Response(
            {"variables": [render_variable(v) for v in variables], "total_entries": total}
        )

    def post(self, request: Request) -> Response:
        body = body_parse(VariableBody, request)
        try:
            variable = variable_create(
                actor=Actor.of_request(request, "rest_api"),
                key=body.key,
                value=body.value_text(),
                description=body.description,
            )
        except VariableExistsError as exc:
            raise Conflict(f"The Variable with key: `{body.key}` already exists") from exc
        return Response(render_variable(variable), status=status.HTTP_201_CREATED)


class VariableDetailView(PublicView):
    required_permissions: ClassVar = {
        "GET": [A + "view_variable"],
        "PATCH": [A + "change_variable"],
        "DELETE": [A + "delete_variable"],
    }

    def get(self, request: Request, variable_key: str) -> Response:
        return Response(render_variable(_variable(variable_key)))

    def patch(self, request: Request, variable_key: str) -> Response:
        body = body_parse(VariableBody, request)
        if body.key != variable_key:
            raise BadRequest("Invalid body, key from request body doesn't match uri parameter")
        variable = _variable(variable_key)
        given = _given(body, request, immutable="key")
        if "value" in given:
            description = body.description if "description" in given else KEEP
            variable = variable_set(
                actor=Actor.of_request(request, "rest_api"),
                key=variable.key,
                value=body.value_text(),
                description=description,
                keep_masked=True,
            )
        elif "description" in given:
            variable = variable_update_description(
                actor=Actor.of_request(request, "rest_api"),
                key=variable.key,
                description=body.description,
            )
        return Response(render_variable(variable))

    def delete(self, request: Request, variable_key: str) -> Response:
        if not variable_delete(
            actor=Actor.of_request(request, "rest_api"), key=path_key(variable_key)
        ):
            raise NotFound(f"The Variable with key: `{variable_key}` was not found")
        return Response(status=status.HTTP_204_NO_CONTENT)


# --- connections ------------------------------------------------------------------------------


def render_connection(row: Connection) -> dict[str, Any]:
    """Airflow's ``ConnectionResponse``: the password masked whole, the extra per key."""
    return {
        "connection_id": row.conn_id,
        "conn_type": row.conn_type,
        "description": row.description,
        "host": row.host,
        "login": row.login,
        "schema": row.schema,
        "port": row.port,
        "password": connection_masked_password(row),
        "extra": connection_masked_extra(row),
        "team_name": None,
    }


class ConnectionBody(Body):
    """Airflow's ``ConnectionBody``."""

    connection_id: Annotated[Text, Field(max_length=200, pattern=r"^[\w.-]+$")]
    conn_type: Text
    description: Text | None = None
    host: Text | None = None
    login: Text | None = None
    schema_: Text | None = Field(default=None, alias="schema")
    port: int | None = None
    password: Text | None = None
    extra: Text | None = None
    team_name: Annotated[Text, Field(max_length=50)] | None = None

    _team = field_validator("team_name")(_team_name_refused)

    @field_validator("extra")
    @classmethod
    def _empty_extra(cls, value: str | None) -> str | None:
        """Airflow's ``""`` is ``{}``. Whether the text is a JSON object (and the port in
        range) the service checks: its 400 names the field (Airflow answers 422 for an
        extra that is no JSON object, a refusal its document cannot say)."""
        return "{}" if value == "" else value

    def fields(self, given: set[str]) -> ConnectionFields:
        """The service's fields: those in ``given``, the others ``KEEP``."""
        values = ConnectionFields()
        for name in ("conn_type", "description", "host", "login", "port", "password", "extra"):
            if name in given:
                setattr(values, name, getattr(self, name))
        if "schema_" in given or "schema" in given:
            values.schema = self.schema_
        return values


def _connection(connection_id: str) -> Connection:
    try:
        return connection_get(conn_id=path_key(connection_id))
    except ConnectionNotFoundError as exc:
        raise NotFound(
            f"The Connection with connection_id: `{connection_id}` was not found"
        ) from exc


class ConnectionListView(PublicView):
    required_permissions: ClassVar = {
        "GET": [A + "view_connection"],
        "POST": [A + "add_connection"],
    }

    def get(self, request: Request) -> Response:
        q = parse(ConnectionFilter, request.query_params, lists=("order_by",))
        connections, total = page(q.filter_queryset(connection_list()), q)
        return Response(
            {"connections": [render_connection(c) for c in connections], "total_entries": total}
        )

    def post(self, request: Request) -> Response:
        body = body_parse(ConnectionBody, request)
        given = set(body.model_fields_set) | {"conn_type"}
        try:
            connection = connection_create(
                actor=Actor.of_request(request, "rest_api"),
                conn_id=body.connection_id,
                values=body.fields(given),
            )
        except ConnectionExistsError as exc:
            # Airflow's unique-violation 409 (its statement and error hidden, as by default)
            raise Conflict(
                {
                    "reason": "Unique constraint violation",
                    "statement": "hidden",
                    "orig_error": "hidden",
                    "message": exc.message,
                }
            ) from exc
        return Response(render_connection(connection), status=status.HTTP_201_CREATED)


class ConnectionDetailView(PublicView):
    required_permissions: ClassVar = {
        "GET": [A + "view_connection"],
        "PATCH": [A + "change_connection"],
        "DELETE": [A + "delete_connection"],
    }

    def get(self, request: Request, connection_id: str) -> Response:
        return Response(render_connection(_connection(connection_id)))

    def patch(self, request: Request, connection_id: str) -> Response:
        body = body_parse(ConnectionBody, request)
        if body.connection_id != connection_id:
            raise BadRequest(
                "The connection_id in the request body does not match the URL parameter"
            )
        found = _connection(connection_id)
        changes = body.fields(_given(body, request, immutable="connection_id"))
        return Response(
            render_connection(
                connection_update(
                    actor=Actor.of_request(request, "rest_api"),
                    conn_id=found.conn_id,
                    changes=changes,
                )
            )
        )

    def delete(self, request: Request, connection_id: str) -> Response:
        found = _connection(connection_id)
        connection_delete(actor=Actor.of_request(request, "rest_api"), conn_id=found.conn_id)
        return Response(status=status.HTTP_204_NO_CONTENT)
