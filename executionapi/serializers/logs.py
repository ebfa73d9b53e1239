"""``/task-instances/{id}/logs``: a chunk of a try's log as its worker ships it, and where the
log stands (``assets_app.services.runs.logs``)."""

from __future__ import annotations

import re
from typing import Any

from django.conf import settings
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.fields import empty

from executionapi.serializers.common import (
    BIGINT_MAX,
    NO_NUL_PATTERN,
    NUL_MESSAGE,
    JSONIntegerField,
    StrictSerializer,
    null_or_skipped,
)
from task_sdk.jsonvalues import string_problem

#: What no text column stores: U+0000 and lone surrogates.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


@extend_schema_field(
    {
        "type": "string",
        "pattern": NO_NUL_PATTERN,
        "description": "Text of the log, UTF-8; at most TASK_LOG_CHUNK_MAX_BYTES bytes "
        "(default 262144); may be empty (with `final`)",
    }
)
class LogContentField(serializers.Field):  # type: ignore[type-arg]
    """Text, possibly empty, of at most ``TASK_LOG_CHUNK_MAX_BYTES`` bytes of UTF-8, holding
    nothing a text column cannot store (U+0000, a lone surrogate)."""

    default_error_messages = {
        "missing": "Field required",
        "string_type": "Input should be a valid string",
        "string_too_long": "String should have at most {max_bytes} bytes of UTF-8, got {size}",
        "null_characters_not_allowed": NUL_MESSAGE,
        "string_unicode": "Input should be valid Unicode: {problem}",
    }

    def run_validation(self, data: Any = empty) -> str | None:
        null_or_skipped(self, data)  # absent: "missing"
        if not isinstance(data, str):
            self.fail("string_type")
        if _UNSTORABLE.search(data):
            if "\x00" in data:
                self.fail("null_characters_not_allowed")
            self.fail("string_unicode", problem=string_problem(data))
        max_bytes: int = settings.TASK_LOG_CHUNK_MAX_BYTES
        if len(data) > max_bytes // 4:  # at most 4 bytes a character: shorter ones fit
            size = len(data.encode("utf-8"))
            if size > max_bytes:
                self.fail("string_too_long", max_bytes=max_bytes, size=size)
        return data

    def to_representation(self, value: Any) -> Any:
        return value


class JSONBooleanField(serializers.BooleanField):
    """A boolean of a JSON body: ``true`` or ``false``, not ``0`` or ``"yes"``."""

    default_error_messages = {"bool_type": "Input should be a valid boolean"}

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("bool_type")
        return data


class TaskLogAppendSerializer(StrictSerializer):
    """``POST /task-instances/{id}/logs``."""

    offset = JSONIntegerField(
        min_value=0,
        max_value=BIGINT_MAX,
        help_text="Where the chunk starts among the bytes (UTF-8) of the try's log sent so far",
    )
    content = LogContentField()
    final = JSONBooleanField(
        required=False,
        default=False,
        help_text="The try's process has ended and this is the end of its log",
    )


class TaskLogPositionSerializer(serializers.Serializer[Any]):
    """Where a try's log stands (``TaskLogPosition``)."""

    next_offset = serializers.IntegerField(
        help_text="Bytes received so far: where the next chunk must start"
    )
    stored_bytes = serializers.IntegerField(help_text="Bytes kept, masked, marker included")
    truncated = serializers.BooleanField(help_text="TASK_LOG_MAX_BYTES was reached")
    closed = serializers.BooleanField(help_text="The worker sent the end of the log")
