"""What every route group shares: strict bases, the wire's leaf fields, the error shapes.

Inputs are strict, like Airflow's pydantic models with ``extra="forbid"``: unknown keys and
naive datetimes are 422s naming the field. Two bases:

- :class:`StrictSerializer`, DRF's machinery unchanged, for the one payload of a request;
- :class:`LeanSerializer`, the same contract in one pass per item, for the small items a
  request carries by the thousand (outlet events and declared outlets): validating 10,000
  of them with plain nested serializers costs several times more than the work they do.

The error shapes at the end only describe the responses ``executionapi.exceptions`` builds.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from contextvars import ContextVar
from datetime import UTC, datetime
from functools import cached_property
from typing import Any

from django.conf import settings
from django.utils.dateparse import parse_datetime
from drf_spectacular.extensions import (
    OpenApiSerializerExtension,
    OpenApiSerializerFieldExtension,
)
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import Direction
from rest_framework import serializers
from rest_framework.exceptions import ErrorDetail
from rest_framework.fields import SkipField, empty
from rest_framework.utils.serializer_helpers import BindingDict

from assets_app.models import NAME_LENGTH
from assets_app.validators import json_value_problem
from task_sdk.jsonvalues import string_problem

#: The largest value of the integer columns the API writes (``pid``, ``map_index``): 32-bit.
INTEGER_MAX = 2**31 - 1
#: The largest 64-bit integer: a ``LIMIT`` (or ``bigint``) beyond it is a database error.
BIGINT_MAX = 2**63 - 1

#: A JSON value holding U+0000 cannot be stored (PostgreSQL's ``jsonb`` and text reject it).
NUL_MESSAGE = "Input should not contain NUL characters (\\u0000)"

#: U+0000 or a lone surrogate: a string holding one cannot be stored (one search).
_UNSTORABLE_CHARACTER = re.compile("[\x00\ud800-\udfff]")

#: The 422 entry of an unknown key.
EXTRA_FORBIDDEN = ErrorDetail("Extra inputs are not permitted", "extra_forbidden")


def json_value_error(
    value: Any, *, max_bytes: int | None = None
) -> serializers.ValidationError | None:
    """The 422 of a JSON value that cannot be stored (``assets_app.validators``), at the
    very value: ``{"a": {"b": [ErrorDetail]}}`` for ``value["a"]["b"]``; else ``None``."""
    problem = json_value_problem(value, max_bytes=max_bytes)
    if problem is None:
        return None
    if problem.code == "null_characters_not_allowed":
        message = NUL_MESSAGE
    elif problem.code == "too_large":
        message = f"Input {problem.message}"
    else:
        message = f"Input is not storable JSON: {problem.message}"
    detail: Any = [ErrorDetail(message, problem.code)]
    for key in reversed(problem.path):
        detail = {key: detail}
    return serializers.ValidationError(detail)


def checked_json_value(value: Any, *, max_bytes: int | None = None) -> Any:
    """``value`` once storable (:func:`json_value_error`), else raises that 422."""
    error = json_value_error(value, max_bytes=max_bytes)
    if error is not None:
        raise error
    return value


#: Bytes of the request body being parsed (set by the execution API's parser): a JSON value
#: in it cannot be longer, so a size limit at least this large needs no measuring.
REQUEST_BODY_BYTES: ContextVar[int | None] = ContextVar("REQUEST_BODY_BYTES", default=None)


def size_limit_to_check(max_bytes: int | None) -> int | None:
    """``max_bytes``, or ``None`` when the current request body is no longer than that."""
    body = REQUEST_BODY_BYTES.get()
    if max_bytes is None or (body is not None and body <= max_bytes):
        return None
    return max_bytes


# --- fields -------------------------------------------------------------------------------


def null_or_skipped(field: serializers.Field[Any, Any, Any, Any], data: Any) -> bool:
    """The start of a one-pass ``run_validation``: whether ``data`` is an allowed ``null``.

    An absent value is skipped (``SkipField``) when the field is optional, else ``missing``.
    """
    if data is empty:
        if not field.required:
            raise SkipField
        field.fail("missing")
    return data is None and field.allow_null


class AwareDateTimeField(serializers.DateTimeField):
    """An ISO 8601 datetime that must carry a timezone; normalized to UTC."""

    default_error_messages = {
        "invalid": "Input should be a valid ISO 8601 datetime",
        "naive": "Input should have timezone info",
    }

    def to_internal_value(self, value: Any) -> datetime:
        parsed: datetime | None = None
        if isinstance(value, datetime):
            parsed = value
        elif isinstance(value, str):
            try:
                parsed = parse_datetime(value.strip())
            except ValueError:
                parsed = None
        if parsed is None:
            self.fail("invalid")
        if parsed.tzinfo is None or parsed.utcoffset() is None:
            self.fail("naive")
        try:
            return parsed.astimezone(UTC)
        except OverflowError:  # e.g. 9999-12-31T23:59:59-05:00 is past year 9999 in UTC
            self.fail("invalid")


class JSONStringField(serializers.CharField):
    """A string of a JSON body, never coerced from another type (``0`` is not ``"0"``) and
    never trimmed (a hostname of one no-break space is not blank), as pydantic checks ``str``;
    otherwise DRF's ``CharField``."""

    default_error_messages = {"string_type": "Input should be a valid string"}

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("trim_whitespace", False)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("string_type")
        return super().to_internal_value(data)


class JSONStringFieldSchema(OpenApiSerializerFieldExtension):  # type: ignore[no-untyped-call]  # drf-spectacular's registry hook
    """In the OpenAPI schema such a string (and a :class:`StrictStringField`) holds no U+0000,
    which no column stores: the server refuses it with a 422."""

    target_class = "executionapi.serializers.common.JSONStringField"
    match_subclasses = True

    def map_serializer_field(self, auto_schema: AutoSchema, direction: Direction) -> Any:
        schema = auto_schema._map_serializer_field(  # type: ignore[no-untyped-call]
            self.target, direction, bypass_extensions=True
        )
        schema.setdefault("pattern", NO_NUL_PATTERN)
        return schema


#: A string without U+0000, in the OpenAPI schema (ECMA and Python regex alike).
NO_NUL_PATTERN = "^[^\\u0000]*$"


class JSONIntegerField(serializers.IntegerField):
    """An integer of a JSON body: a JSON integer, not a string or a float."""

    default_error_messages = {"int_type": "Input should be a valid integer"}

    def to_internal_value(self, data: Any) -> int:
        if not isinstance(data, int) or isinstance(data, bool):
            self.fail("int_type")
        return data


class JSONNumberField(serializers.FloatField):
    """A number of a JSON body: a finite JSON number, not a string."""

    default_error_messages = {
        "float_type": "Input should be a valid number",
        "finite_number": "Input should be a finite number",
    }

    def to_internal_value(self, data: Any) -> float:
        if not isinstance(data, int | float) or isinstance(data, bool):
            self.fail("float_type")
        try:
            value = float(data)
        except OverflowError:
            self.fail("finite_number")
        if not math.isfinite(value):
            self.fail("finite_number")
        return value


class QueryIntegerField(serializers.IntegerField):
    """An integer query parameter: decimal digits with an optional ``-``, nothing else (DRF
    would also take ``1.0``)."""

    default_error_messages = {"int_parsing": "Input should be a valid integer"}

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, str) and not _INTEGER_TEXT.fullmatch(data):
            self.fail("int_parsing")
        return super().to_internal_value(data)


_INTEGER_TEXT = re.compile(r"-?[0-9]+")


def name_field(**kwargs: Any) -> serializers.CharField:
    """A name or uri: 1 to 1500 characters, kept exactly as sent."""
    return JSONStringField(min_length=1, max_length=NAME_LENGTH, trim_whitespace=False, **kwargs)


class StrictStringField(JSONStringField):
    """A string checked as pydantic checks ``str`` (no coercion), in one pass.

    No validator objects: these fields are validated by the thousand. Absent → ``missing``
    when required; ``null`` → ``string_type`` unless ``allow_null``; then length (1 to
    ``max_length``), U+0000 and lone surrogates (which no database column stores), and with
    ``not_blank`` a whitespace-only value.
    """

    default_error_messages = {
        "missing": "Field required",
        "string_type": "Input should be a valid string",
        "string_too_short": "String should have at least 1 character",
        "string_too_long": "String should have at most {max_length} characters",
        "null_characters_not_allowed": NUL_MESSAGE,
        "string_unicode": "Input should be valid Unicode: {problem}",
        "string_blank": "String should not be only whitespace",
    }

    def __init__(
        self, *, max_length: int = NAME_LENGTH, not_blank: bool = False, **kwargs: Any
    ) -> None:
        super().__init__(min_length=1, max_length=max_length, trim_whitespace=False, **kwargs)
        self.longest = max_length
        self.not_blank = not_blank

    def run_validation(self, data: Any = empty) -> str | None:
        if null_or_skipped(self, data):
            return None
        if not isinstance(data, str):
            self.fail("string_type")
        if not data:
            self.fail("string_too_short")
        if len(data) > self.longest:
            self.fail("string_too_long", max_length=self.longest)
        if _UNSTORABLE_CHARACTER.search(data):
            if "\x00" in data:
                self.fail("null_characters_not_allowed")
            self.fail("string_unicode", problem=string_problem(data))
        if self.not_blank and data.isspace():
            self.fail("string_blank")
        return data


class JSONObjectField(serializers.DictField):
    """A JSON object stored as is (``extra``): any keys and values the database can store
    (:func:`json_value_error`); with ``max_bytes_setting``, at most that setting's number of
    bytes as compact JSON."""

    default_error_messages = {
        "missing": "Field required",
        "dict_type": "Input should be a JSON object",
    }

    def __init__(self, *, max_bytes_setting: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.max_bytes_setting = max_bytes_setting

    def run_validation(self, data: Any = empty) -> dict[str, Any] | None:
        if null_or_skipped(self, data):
            return None
        if not isinstance(data, dict):
            self.fail("dict_type")
        max_bytes = None
        if self.max_bytes_setting is not None:
            max_bytes = size_limit_to_check(getattr(settings, self.max_bytes_setting))
        checked_json_value(data, max_bytes=max_bytes)
        return data


class StorableJSONField(serializers.JSONField):
    """A JSON value stored as sent (an XCom value, rendered template fields).

    422 at the very value the database cannot store (:func:`json_value_error`); with
    ``object_only`` the value must be a JSON object.
    """

    default_error_messages = {"dict_type": "Input should be a JSON object"}

    def __init__(self, *, object_only: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.object_only = object_only

    def run_validation(self, data: Any = empty) -> Any:
        if self.object_only and not isinstance(data, dict):
            self.fail("dict_type")
        return checked_json_value(data)


# --- bases --------------------------------------------------------------------------------


class StrictSerializer(serializers.Serializer[Any]):
    """Rejects unknown keys (each named in the 422), like Airflow's ``extra="forbid"``.

    A request payload: its fields are built once per class and shared by every instance
    (DRF deep-copies and binds every declared field, nested serializers included, for each
    instance: a tenth of a success request's CPU). That is safe because validating keeps no
    state in a field, and nothing here reads a field's ``context``, ``parent`` or ``root``
    (the shared fields' root is a blank, non-partial instance of the class), as for the
    module-level outlet event shapes.
    """

    @property
    def fields(self) -> BindingDict:
        cls = type(self)
        shared: BindingDict | None = cls.__dict__.get("_shared_fields")
        if shared is None:
            prototype = cls()
            shared = BindingDict(prototype)
            for name, field in prototype.get_fields().items():
                shared[name] = field
            # two threads racing build equal dicts: either wins
            setattr(cls, "_shared_fields", shared)  # noqa: B010
        return shared

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, Mapping):
            raise serializers.ValidationError(
                {"non_field_errors": [ErrorDetail("Input should be a JSON object", "dict_type")]}
            )
        unknown = {key: [EXTRA_FORBIDDEN] for key in data if key not in self.fields}
        try:
            value = super().to_internal_value(data)
        except serializers.ValidationError as exc:
            if unknown and isinstance(exc.detail, dict):
                raise serializers.ValidationError({**exc.detail, **unknown}) from exc
            raise
        if unknown:
            raise serializers.ValidationError(unknown)
        return value


class StrictSerializerSchema(OpenApiSerializerExtension):  # type: ignore[no-untyped-call]  # drf-spectacular's registry hook
    """In the OpenAPI schema a strict payload admits no other keys."""

    target_class = StrictSerializer
    match_subclasses = True

    def map_serializer(self, auto_schema: AutoSchema, direction: Direction) -> dict[str, Any]:
        schema: dict[str, Any] = auto_schema._map_serializer(  # type: ignore[no-untyped-call]
            self.target, direction, bypass_extensions=True
        )
        if direction == "request":
            schema["additionalProperties"] = False
        return schema


class LeanListSerializer(serializers.ListSerializer[Any]):
    """``many=True`` of a :class:`LeanSerializer`: a JSON list, errors keyed by index."""

    default_error_messages = {
        "missing": "Field required",
        "list_type": "Input should be a valid list",
    }

    def run_validation(self, data: Any = empty) -> list[Any] | None:
        if null_or_skipped(self, data):
            return None
        if not isinstance(data, list):
            self.fail("list_type")
        child = self.child
        assert child is not None  # noqa: S101 - set by many_init; narrows the type
        values: list[Any] = []
        errors: dict[Any, Any] = {}  # by index (DRF takes any key)
        for index, item in enumerate(data):
            try:
                values.append(child.run_validation(item))
            except serializers.ValidationError as exc:
                errors[index] = exc.detail
        if errors:
            raise serializers.ValidationError(errors)
        return values


class LeanSerializer(StrictSerializer):
    """A :class:`StrictSerializer` for small items validated by the thousand, in one pass.

    Each field validates itself (``run_validation``) and its value is kept under the field's
    name; then :meth:`validate` turns the values into the item's domain value. What these
    items do not use is skipped, so do not use it here: ``validate_<field>`` methods,
    serializer-level ``validators``, ``source``, defaults of absent fields (absent optional
    fields are simply missing from ``attrs``).
    """

    default_error_messages = {
        "missing": "Field required",
        "dict_type": "Input should be a JSON object",
    }

    @classmethod
    def many_init(cls, *args: Any, **kwargs: Any) -> LeanListSerializer:
        """``many=True``: the options (``required``, ``allow_null``) are the list's; each item
        is required and not null."""
        kwargs["child"] = cls()
        return LeanListSerializer(*args, **kwargs)

    def run_validation(self, data: Any = empty) -> Any:
        if null_or_skipped(self, data):
            return None
        if not isinstance(data, dict):
            self.fail("dict_type")
        attrs = self.to_internal_value(data)
        try:
            return self.validate(attrs)
        except serializers.ValidationError as exc:
            raise serializers.ValidationError(detail=serializers.as_serializer_error(exc)) from exc

    @cached_property
    def _fields_by_name(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
        return dict(self.fields.items())

    def to_internal_value(self, data: Mapping[str, Any]) -> dict[str, Any]:
        fields = self._fields_by_name
        attrs: dict[str, Any] = {}
        errors: dict[str, Any] = {}
        for name, field in fields.items():
            value = data.get(name, empty)
            if value is empty and not field.required:
                continue  # absent and optional: not in attrs
            try:
                attrs[name] = field.run_validation(value)
            except serializers.ValidationError as exc:
                errors[name] = exc.detail
            except SkipField:
                pass
        if not data.keys() <= fields.keys():
            errors.update((key, [EXTRA_FORBIDDEN]) for key in data if key not in fields)
        if errors:
            raise serializers.ValidationError(errors)
        return attrs


# --- error responses (rendered by executionapi.exceptions; here for the schema) --------------


class MessageSerializer(serializers.Serializer[Any]):
    message = serializers.CharField()


class ErrorDetailSerializer(serializers.Serializer[Any]):
    reason = serializers.CharField()
    message = serializers.CharField()


class ErrorResponseSerializer(serializers.Serializer[Any]):
    detail = ErrorDetailSerializer()


class ValidationErrorItemSerializer(serializers.Serializer[Any]):
    loc = serializers.ListField(child=serializers.JSONField())
    msg = serializers.CharField()
    type = serializers.CharField()


class ValidationErrorResponseSerializer(serializers.Serializer[Any]):
    detail = ValidationErrorItemSerializer(many=True)
