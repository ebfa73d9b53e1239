"""``/variables/…`` and ``/connections/{id}``: Airflow 3.3's ``VariablePostBody``,
``VariableResponse``, ``VariableKeysResponse`` and ``ConnectionResponse``."""

from __future__ import annotations

import re
from typing import Any

from rest_framework import serializers
from rest_framework.fields import empty

from assets_app.models import SECRET_ID_LENGTH
from executionapi.serializers.common import (
    NUL_MESSAGE,
    JSONStringField,
    QueryIntegerField,
    StrictSerializer,
    null_or_skipped,
)
from task_sdk.jsonvalues import string_problem

#: U+0000 or a lone surrogate: a value holding one cannot be stored (or encrypted).
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")

#: ``GET /variables/keys``: Airflow's bounds of ``limit`` and its default.
KEYS_LIMIT_DEFAULT = 1000
KEYS_LIMIT_MAX = 10_000


class TextValueField(JSONStringField):
    """A ``str | None`` as pydantic checks it (no coercion), any length, empty included;
    U+0000 and lone surrogates (which cannot be stored) are refused."""

    default_error_messages = {
        "string_type": "Input should be a valid string",
        "null_characters_not_allowed": NUL_MESSAGE,
        "string_unicode": "Input should be valid Unicode: {problem}",
    }

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(allow_null=True, allow_blank=True, trim_whitespace=False, **kwargs)

    def run_validation(self, data: Any = empty) -> str | None:
        if null_or_skipped(self, data):
            return None
        if not isinstance(data, str):
            self.fail("string_type")
        if _UNSTORABLE.search(data):
            if "\x00" in data:
                self.fail("null_characters_not_allowed")
            self.fail("string_unicode", problem=string_problem(data))
        return data


class VariablePostBodySerializer(StrictSerializer):
    """``{"val": str | null, "description": str | null}``; ``value`` is accepted for
    ``val`` (Airflow's model populates by name too, and its client sends ``value``)."""

    val = TextValueField(required=False)
    value = TextValueField(required=False)
    description = TextValueField(required=False, default=None)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "val" not in attrs and "value" not in attrs:
            raise serializers.ValidationError(
                {"val": [serializers.ErrorDetail("Field required", "missing")]}
            )
        value = attrs["val"] if "val" in attrs else attrs["value"]
        return {"value": value, "description": attrs.get("description")}


class VariableKeyPathSerializer(serializers.Serializer[Any]):
    variable_key = JSONStringField(min_length=1, max_length=SECRET_ID_LENGTH, trim_whitespace=False)


class VariableKeysQuerySerializer(serializers.Serializer[Any]):
    prefix = serializers.CharField(
        required=False, allow_blank=True, trim_whitespace=False, max_length=SECRET_ID_LENGTH
    )
    limit = QueryIntegerField(
        required=False, default=KEYS_LIMIT_DEFAULT, min_value=1, max_value=KEYS_LIMIT_MAX
    )
    offset = QueryIntegerField(required=False, default=0, min_value=0, max_value=2**63 - 1)


class VariableResponseSerializer(serializers.Serializer[Any]):
    key = serializers.CharField()
    value = serializers.CharField(allow_null=True)


class VariableKeysResponseSerializer(serializers.Serializer[Any]):
    keys = serializers.ListField(child=serializers.CharField())
    total_entries = serializers.IntegerField()


class ConnectionResponseSerializer(serializers.Serializer[Any]):
    """What a task needs of a connection, its password and extra decrypted: this is the
    one response that carries them."""

    conn_id = serializers.CharField()
    conn_type = serializers.CharField()
    host = serializers.CharField(allow_null=True)
    schema = serializers.CharField(allow_null=True)
    login = serializers.CharField(allow_null=True)
    password = serializers.CharField(allow_null=True)
    port = serializers.IntegerField(allow_null=True)
    extra = serializers.CharField(allow_null=True)
