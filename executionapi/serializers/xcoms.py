"""``/xcoms/{dag_id}/{run_id}/{task_id}/{key}`` (and its ``/slice`` and ``/item/{offset}``):
their path and query parameters, their answers."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from assets_app.models import ID_LENGTH, XCom
from executionapi.serializers.common import BIGINT_MAX, INTEGER_MAX, QueryIntegerField


class XComPathSerializer(serializers.Serializer[Any]):
    """The path parameters, within the ``xcom`` columns (``run_id`` arrives unencoded); kept
    exactly as sent (a key of whitespace is a key)."""

    dag_id = serializers.CharField(max_length=ID_LENGTH, trim_whitespace=False)
    run_id = serializers.CharField(max_length=ID_LENGTH, trim_whitespace=False)
    task_id = serializers.CharField(max_length=ID_LENGTH, trim_whitespace=False)
    key = serializers.CharField(
        max_length=XCom._meta.get_field("key").max_length, trim_whitespace=False
    )


class XComQuerySerializer(serializers.Serializer[Any]):
    map_index = QueryIntegerField(
        required=False,
        default=-1,
        min_value=-1,
        max_value=INTEGER_MAX,
        help_text="Default -1 (not mapped)",
    )


class XComSetQuerySerializer(XComQuerySerializer):
    mapped_length = QueryIntegerField(
        required=False, allow_null=True, min_value=0, max_value=INTEGER_MAX
    )
    dag_result = serializers.BooleanField(required=False, default=False)


class XComResponseSerializer(serializers.Serializer[Any]):
    key = serializers.CharField()
    value = serializers.JSONField(allow_null=True)


#: A sequence position beyond a 64-bit ``OFFSET`` is refused (422) rather than sent to the
#: database, which would fail on it.
OFFSET_LIMIT = BIGINT_MAX - 1


def offset_field(**kwargs: Any) -> QueryIntegerField:
    return QueryIntegerField(min_value=-OFFSET_LIMIT, max_value=OFFSET_LIMIT, **kwargs)


class XComGetQuerySerializer(XComQuerySerializer):
    include_prior_dates = serializers.BooleanField(required=False, default=False)
    offset = offset_field(
        required=False,
        help_text="The value at this position in map-index order (-1: the last); "
        "replaces map_index",
    )


class XComSliceQuerySerializer(serializers.Serializer[Any]):
    """``…/slice``: Python's ``values[start:stop:step]`` over the values by map index."""

    start = offset_field(required=False)
    stop = offset_field(required=False)
    step = offset_field(required=False)
    include_prior_dates = serializers.BooleanField(required=False, default=False)


class XComItemPathSerializer(XComPathSerializer):
    offset = offset_field()
