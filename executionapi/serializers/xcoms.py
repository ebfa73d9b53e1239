"""``/xcoms/{dag_id}/{run_id}/{task_id}/{key}``: its path and query parameters, its answer."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from assets_app.models import ID_LENGTH, XCom
from executionapi.serializers.common import INTEGER_MAX, QueryIntegerField


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


class XComGetQuerySerializer(XComQuerySerializer):
    include_prior_dates = serializers.BooleanField(required=False, default=False)


class XComSetQuerySerializer(XComQuerySerializer):
    mapped_length = QueryIntegerField(
        required=False, allow_null=True, min_value=0, max_value=INTEGER_MAX
    )
    dag_result = serializers.BooleanField(required=False, default=False)


class XComResponseSerializer(serializers.Serializer[Any]):
    key = serializers.CharField()
    value = serializers.JSONField(allow_null=True)
