"""``/api/v1/variables`` and ``/api/v1/connections``: list, get, create, update, delete.

Permission-checked like every operator route (``assets_app.view_variable``,
``add_connection`` …). Secrets are write-only: a connection's ``password`` reads back as
``***`` (or ``null`` when none is stored), its ``extra`` with every sensitive key's value
``***``, and a variable's value is masked when its key is sensitive (Airflow's public API
masks the same way, ``assets_app.masking``). An update that sends the masked extra back keeps
the hidden values; one that leaves out ``password`` keeps the stored password.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

import django_filters
from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
    extend_schema_view,
)
from rest_framework import exceptions, mixins, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.reverse import reverse

from assets_app.exceptions import InvalidInputError
from assets_app.models import SECRET_ID_LENGTH, Connection, Variable
from assets_app.selectors.secrets import (
    connection_list,
    connection_masked_extra,
    connection_masked_password,
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
from operatorapi.serializers import StrictCharField, StrictInputSerializer
from operatorapi.views import NOT_FOUND, OperatorViewSet

T = TypeVar("T")

# --- output -----------------------------------------------------------------------------------


class VariableSerializer(serializers.ModelSerializer[Variable]):
    value = serializers.SerializerMethodField(
        method_name="masked_value",
        help_text="The value; `***` when the key is sensitive (Airflow's masking).",
    )

    class Meta:
        model = Variable
        fields = ["key", "value", "description", "is_encrypted"]

    def masked_value(self, variable: Variable) -> str | None:
        return variable_masked_value(variable)


class ConnectionSerializer(serializers.ModelSerializer[Connection]):
    password = serializers.SerializerMethodField(
        help_text="`***` when a password is stored, else null: passwords are write-only."
    )
    extra = serializers.SerializerMethodField(
        help_text="The extra's JSON text, every sensitive key's value `***`."
    )

    class Meta:
        model = Connection
        fields = [
            "conn_id",
            "conn_type",
            "description",
            "host",
            "schema",
            "login",
            "port",
            "password",
            "extra",
            "is_encrypted",
            "is_extra_encrypted",
        ]

    def get_password(self, connection: Connection) -> str | None:
        return connection_masked_password(connection)

    def get_extra(self, connection: Connection) -> str | None:
        return connection_masked_extra(connection)


# --- input ------------------------------------------------------------------------------------


def _text(**kwargs: Any) -> StrictCharField:
    return StrictCharField(
        trim_whitespace=False, allow_null=True, allow_blank=True, required=False, **kwargs
    )


@extend_schema_field(OpenApiTypes.ANY)
class JSONTextField(serializers.Field[str, Any, Any, Any]):
    """A string kept as it is, or any other JSON value sent as its JSON text."""

    def to_internal_value(self, data: Any) -> str:
        return data if isinstance(data, str) else json.dumps(data)

    def to_representation(self, value: str) -> Any:
        return value


class VariableCreateSerializer(StrictInputSerializer):
    key = StrictCharField(min_length=1, max_length=SECRET_ID_LENGTH, trim_whitespace=False)
    value = JSONTextField(
        allow_null=True, help_text="A string, or any JSON value (stored as its JSON text)."
    )
    description = _text()


class VariableUpdateSerializer(StrictInputSerializer):
    value = JSONTextField(required=False, allow_null=True)
    description = _text()


class ConnectionInputSerializer(StrictInputSerializer):
    conn_type = StrictCharField(min_length=1, max_length=500, trim_whitespace=False)
    description = _text(max_length=5000)
    host = _text(max_length=500)
    schema = _text(max_length=500)
    login = _text()
    password = _text(help_text="Write-only. Left out on update: kept.")
    port = serializers.IntegerField(required=False, allow_null=True, min_value=0, max_value=65535)
    extra = JSONTextField(
        required=False,
        allow_null=True,
        help_text="A JSON object, or its JSON text. On update, a `***` left at a sensitive "
        "key keeps the stored value.",
    )

    def fields_given(self) -> ConnectionFields:
        data = self.validated_data
        names = ("conn_type", "description", "host", "schema", "login", "password", "port")
        values = ConnectionFields(**{name: data[name] for name in names if name in data})
        if "extra" in data:
            values.extra = data["extra"]
        return values


class ConnectionCreateSerializer(ConnectionInputSerializer):
    conn_id = StrictCharField(min_length=1, max_length=SECRET_ID_LENGTH, trim_whitespace=False)


class ConnectionUpdateSerializer(ConnectionInputSerializer):
    conn_type = StrictCharField(required=False, min_length=1, max_length=500, trim_whitespace=False)


def _field_errors(call: Callable[[], T]) -> T:
    """Run a service; an ``InvalidInputError`` naming a field is that field's 400."""
    try:
        return call()
    except InvalidInputError as exc:
        field = exc.context.get("field")
        if field is None:
            raise
        raise exceptions.ValidationError({field: [exc.message]}) from exc


# --- filters ----------------------------------------------------------------------------------


class VariableFilter(django_filters.FilterSet):  # type: ignore[misc]  # django-filter is untyped
    key_prefix = django_filters.CharFilter(
        field_name="key",
        lookup_expr="startswith",
        max_length=SECRET_ID_LENGTH,
        help_text="Variables whose key starts with this text.",
    )

    class Meta:
        model = Variable
        fields: list[str] = []


class ConnectionFilter(django_filters.FilterSet):  # type: ignore[misc]  # django-filter is untyped
    conn_type = django_filters.CharFilter(
        field_name="conn_type", max_length=500, help_text="Connections of exactly this type."
    )
    conn_id_prefix = django_filters.CharFilter(
        field_name="conn_id",
        lookup_expr="startswith",
        max_length=SECRET_ID_LENGTH,
        help_text="Connections whose conn_id starts with this text.",
    )

    class Meta:
        model = Connection
        fields: list[str] = []


# --- views ------------------------------------------------------------------------------------


class SecretViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, OperatorViewSet):
    """Looked up by a text key that may hold slashes; one that no row can have (a NUL, which
    PostgreSQL refuses in a query, or too long) is a 404 without a query."""

    lookup_value_regex = ".+"

    def get_object(self) -> Any:
        value = str(self.kwargs[self.lookup_field])
        if "\x00" in value or len(value) > SECRET_ID_LENGTH:
            raise Http404(f"No {self.get_queryset().model._meta.verbose_name} {value!r}")
        return super().get_object()


@extend_schema_view(
    list=extend_schema(summary="List variables", description="By key."),
    retrieve=extend_schema(
        summary="One variable", responses={200: VariableSerializer, **NOT_FOUND}
    ),
)
class VariableViewSet(SecretViewSet):
    queryset = variable_list()
    serializer_class = VariableSerializer
    filterset_class = VariableFilter
    cursor_ordering = ("key",)
    lookup_field = "key"

    @extend_schema(
        summary="Create a variable",
        description="409 `variable_exists` when the key is taken. Needs `assets_app.add_variable`.",
        request=VariableCreateSerializer,
        responses={
            201: VariableSerializer,
            400: OpenApiResponse(description="Bad input"),
            409: OpenApiResponse(description="key taken"),
        },
    )
    def create(self, request: Request) -> Response:
        payload = VariableCreateSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        variable = _field_errors(
            lambda: variable_create(
                actor=Actor.of_request(request, "rest_api"),
                key=data["key"],
                value=data["value"],
                description=data.get("description"),
            )
        )
        location = reverse("operatorapi:variable-detail", args=[variable.key], request=request)
        return Response(
            VariableSerializer(variable).data,
            status=status.HTTP_201_CREATED,
            headers={"Location": location},
        )

    @extend_schema(
        summary="Change a variable's value or description",
        description="Fields left out are kept. Needs `assets_app.change_variable`.",
        request=VariableUpdateSerializer,
        responses={200: VariableSerializer, **NOT_FOUND},
    )
    def partial_update(self, request: Request, key: str) -> Response:
        variable = self.get_object()
        payload = VariableUpdateSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        if "value" in data:
            description = data.get("description", KEEP)
            variable = _field_errors(
                lambda: variable_set(
                    actor=Actor.of_request(request, "rest_api"),
                    key=variable.key,
                    value=data["value"],
                    description=description,
                    keep_masked=True,
                )
            )
        elif "description" in data:
            variable = _field_errors(
                lambda: variable_update_description(
                    actor=Actor.of_request(request, "rest_api"),
                    key=variable.key,
                    description=data["description"],
                )
            )
        return Response(VariableSerializer(variable).data)

    @extend_schema(
        summary="Delete a variable",
        description="Needs `assets_app.delete_variable`.",
        responses={204: OpenApiResponse(description="Deleted"), **NOT_FOUND},
    )
    def destroy(self, request: Request, key: str) -> Response:
        variable = self.get_object()
        variable_delete(actor=Actor.of_request(request, "rest_api"), key=variable.key)
        return Response(status=status.HTTP_204_NO_CONTENT)


@extend_schema_view(
    list=extend_schema(summary="List connections", description="By conn_id."),
    retrieve=extend_schema(
        summary="One connection", responses={200: ConnectionSerializer, **NOT_FOUND}
    ),
)
class ConnectionViewSet(SecretViewSet):
    queryset = connection_list()
    serializer_class = ConnectionSerializer
    filterset_class = ConnectionFilter
    cursor_ordering = ("conn_id",)
    lookup_field = "conn_id"

    @extend_schema(
        summary="Create a connection",
        description="The password and the extra are stored encrypted. 409 "
        "`connection_exists` when the conn_id is taken. Needs `assets_app.add_connection`.",
        request=ConnectionCreateSerializer,
        responses={
            201: ConnectionSerializer,
            400: OpenApiResponse(description="Bad input"),
            409: OpenApiResponse(description="conn_id taken"),
        },
    )
    def create(self, request: Request) -> Response:
        payload = ConnectionCreateSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        conn_id = payload.validated_data["conn_id"]
        values = payload.fields_given()
        connection = _field_errors(
            lambda: connection_create(
                actor=Actor.of_request(request, "rest_api"), conn_id=conn_id, values=values
            )
        )
        location = reverse("operatorapi:connection-detail", args=[conn_id], request=request)
        return Response(
            ConnectionSerializer(connection).data,
            status=status.HTTP_201_CREATED,
            headers={"Location": location},
        )

    @extend_schema(
        summary="Change a connection",
        description="Fields left out are kept, the password included; `password: null` "
        "clears it. Needs `assets_app.change_connection`.",
        request=ConnectionUpdateSerializer,
        responses={200: ConnectionSerializer, **NOT_FOUND},
    )
    def partial_update(self, request: Request, conn_id: str) -> Response:
        connection = self.get_object()
        payload = ConnectionUpdateSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        changes = payload.fields_given()
        updated = _field_errors(
            lambda: connection_update(
                actor=Actor.of_request(request, "rest_api"),
                conn_id=connection.conn_id,
                changes=changes,
            )
        )
        return Response(ConnectionSerializer(updated).data)

    @extend_schema(
        summary="Delete a connection",
        description="Needs `assets_app.delete_connection`.",
        responses={204: OpenApiResponse(description="Deleted"), **NOT_FOUND},
    )
    def destroy(self, request: Request, conn_id: str) -> Response:
        connection = self.get_object()
        connection_delete(actor=Actor.of_request(request, "rest_api"), conn_id=connection.conn_id)
        return Response(status=status.HTTP_204_NO_CONTENT)
