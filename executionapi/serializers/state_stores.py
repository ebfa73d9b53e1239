"""``/store/ti/…`` and ``/store/asset/…``: their keys, query parameters, bodies and answers
(Airflow 3.3.2's ``TaskStateStorePutBody``, ``AssetStateStorePutBody`` and their responses)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.fields import empty

from assets_app.models import STATE_KEY_LENGTH
from executionapi.serializers.common import (
    NO_NUL_PATTERN,
    AwareDateTimeField,
    StrictSerializer,
    checked_json_value,
    name_field,
)

#: Any JSON value but ``null`` (OpenAPI 3.0 cannot say "not null" of an untyped schema).
NOT_NULL_JSON_VALUE = {
    "description": "Any JSON value but null",
    "anyOf": [
        {"type": "object", "additionalProperties": {}},
        {"type": "array", "items": {}},
        {"type": "string", "pattern": NO_NUL_PATTERN},
        {"type": "number"},
        {"type": "boolean"},
    ],
}


@extend_schema_field(NOT_NULL_JSON_VALUE)
class StateValueField(serializers.JSONField):
    """A stored value: required, not ``null`` (Airflow's "value cannot be null"), and a JSON
    value the server stores (no ``NaN``, U+0000 …; a 422 at the very value)."""

    default_error_messages = {
        "missing": "Field required",
        "value_error": "Value error, value cannot be null",
    }

    def run_validation(self, data: Any = empty) -> Any:
        if data is empty:
            self.fail("missing")
        if data is None:
            self.fail("value_error")
        return checked_json_value(data)


def key_field(**kwargs: Any) -> serializers.CharField:
    """A state store key: 1 to 512 characters, no U+0000, kept exactly as sent."""
    return serializers.CharField(
        min_length=1, max_length=STATE_KEY_LENGTH, trim_whitespace=False, **kwargs
    )


class StateKeyPathSerializer(serializers.Serializer[Any]):
    """``{key:path}`` of ``/store/ti/{task_instance_id}/{key}``."""

    key = key_field()


class TaskStatePutBodySerializer(StrictSerializer):
    """Request body for setting a task state store value."""

    value = StateValueField()
    expires_at = AwareDateTimeField(
        required=False,
        allow_null=True,
        default=None,
        help_text="When the key may be deleted (null: never)",
    )


class AssetStatePutBodySerializer(StrictSerializer):
    """Request body for setting an asset state store value."""

    value = StateValueField()


class StateStoreResponseSerializer(serializers.Serializer[Any]):
    """A task's or an asset's state store value, as stored."""

    value = serializers.JSONField()


class AssetStateByNameQuerySerializer(serializers.Serializer[Any]):
    name = name_field()
    key = key_field()


class AssetStateByUriQuerySerializer(serializers.Serializer[Any]):
    uri = name_field()
    key = key_field()


class AssetStateClearByNameQuerySerializer(serializers.Serializer[Any]):
    name = name_field()


class AssetStateClearByUriQuerySerializer(serializers.Serializer[Any]):
    uri = name_field()
