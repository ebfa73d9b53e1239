"""Wire format of the operator API: output serializers fed by ``operatorapi.selectors``, and one
strict input serializer per payload (unknown fields, wrong JSON types and oversized ``extra``
are 400s naming the field). No writes through ``ModelSerializer.save()``: views call services.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from django.conf import settings
from drf_spectacular.extensions import OpenApiSerializerExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import Direction
from rest_framework import serializers

from assets_app.conditions import condition_parse, condition_summary
from assets_app.exceptions import InvalidAssetExpression
from assets_app.models import (
    DAG_RUN_SUMMARY_FIELDS,
    ID_LENGTH,
    NAME_LENGTH,
    PARTITION_KEY_LENGTH,
    Asset,
    AssetAlias,
    AssetDagRunQueue,
    AssetEvent,
    Dag,
    DagImportError,
    DagRun,
)
from assets_app.validators import json_value_problem
from operatorapi.params import DatetimeParameterError, parse_datetime_parameter

# --- output -------------------------------------------------------------------------------------


class AssetKeySerializer(serializers.ModelSerializer[Asset]):
    """An asset where another object refers to it."""

    class Meta:
        model = Asset
        fields = ["id", "name", "uri", "group"]


class AssetSerializer(serializers.ModelSerializer[Asset]):
    active = serializers.BooleanField(
        source="is_active",
        read_only=True,
        help_text="Some declared, non-stale DAG schedules on, produces or reads it.",
    )
    aliases: serializers.SlugRelatedField[AssetAlias] = serializers.SlugRelatedField(
        many=True,
        read_only=True,
        slug_field="name",
        help_text="Names of the aliases that have resolved to this asset.",
    )

    class Meta:
        model = Asset
        fields = [
            "id",
            "name",
            "uri",
            "group",
            "extra",
            "active",
            "aliases",
            "created_at",
            "updated_at",
        ]


class AssetAliasSerializer(serializers.ModelSerializer[AssetAlias]):
    assets = AssetKeySerializer(many=True, read_only=True)

    class Meta:
        model = AssetAlias
        fields = ["id", "name", "group", "assets"]


class DagRunKeySerializer(serializers.ModelSerializer[DagRun]):
    """A DAG run where another object refers to it."""

    class Meta:
        model = DagRun
        fields = ["id", "dag_id", "run_id", "run_type", "state"]


class AssetEventSerializer(serializers.ModelSerializer[AssetEvent]):
    asset_id = serializers.IntegerField(read_only=True, allow_null=True)
    asset = AssetKeySerializer(
        read_only=True, allow_null=True, help_text="null once the asset has been deleted"
    )
    source_aliases: serializers.SlugRelatedField[AssetAlias] = serializers.SlugRelatedField(
        many=True,
        read_only=True,
        slug_field="name",
        help_text="Names of the aliases the event was emitted through.",
    )
    created_dagruns = DagRunKeySerializer(
        many=True, read_only=True, help_text="The asset-triggered runs that consumed the event."
    )

    class Meta:
        model = AssetEvent
        fields = [
            "id",
            "asset_id",
            "asset",
            "extra",
            "source_dag_id",
            "source_task_id",
            "source_run_id",
            "source_map_index",
            "partition_key",
            "timestamp",
            "source_aliases",
            "created_dagruns",
        ]


class ImportErrorSerializer(serializers.ModelSerializer[DagImportError]):
    """A DAG file that failed to load: its path, when, and Airflow's traceback (or the
    features the registry refused)."""

    class Meta:
        model = DagImportError
        fields = ["id", "filename", "timestamp", "stacktrace"]


class DagSerializer(serializers.ModelSerializer[Dag]):
    schedule = serializers.SerializerMethodField(
        help_text="The asset schedule in one line (`a & (b | alias:c)`), or null."
    )

    class Meta:
        model = Dag
        fields = [
            "dag_id",
            "is_paused",
            "is_stale",
            "schedule",
            "asset_expression",
            "timetable_summary",
            "max_active_runs",
            "max_active_tasks",
            "tags",
            "next_dagrun_create_after",
            "task_ids",
            "fileloc",
            "last_parsed_time",
        ]

    def get_schedule(self, dag: Dag) -> str | None:
        if dag.asset_expression is None:
            return None
        try:
            return condition_summary(condition_parse(dag.asset_expression))
        except InvalidAssetExpression:
            return None


class DagRunSerializer(serializers.ModelSerializer[DagRun]):
    class Meta:
        model = DagRun
        fields = [
            *("id", "dag_id", *DAG_RUN_SUMMARY_FIELDS, "created_at", "conf", "partition_key"),
            *("triggered_by", "triggering_user_name"),
        ]


class QueueEntrySerializer(serializers.ModelSerializer[AssetDagRunQueue]):
    dag_id = serializers.CharField(source="target_dag_id", read_only=True)
    asset = AssetKeySerializer(read_only=True)

    class Meta:
        model = AssetDagRunQueue
        fields = ["id", "dag_id", "asset", "created_at"]


# --- input --------------------------------------------------------------------------------------


class StrictCharField(serializers.CharField):
    """A JSON string, nothing else (DRF's ``CharField`` turns numbers into strings)."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictBooleanField(serializers.BooleanField):
    """JSON ``true`` or ``false``, nothing else (DRF's accepts ``"yes"``, ``1`` …)."""

    default_error_messages = {"invalid": "Must be true or false."}

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid")
        return data


NUL_MESSAGE = "Must not contain NUL characters (\\u0000); found at {where}."


def _nul_path(value: Any) -> str | None:
    """Where in a JSON value a string or object key holds U+0000 (``.a[0]``), or ``None``."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        where, node = stack.pop()
        if isinstance(node, str):
            if "\x00" in node:
                return where
        elif isinstance(node, Mapping):
            for key, child in node.items():
                if "\x00" in str(key):
                    return f"{where}.{key!r}"
                stack.append((f"{where}.{key}", child))
        elif isinstance(node, list):
            stack.extend((f"{where}[{index}]", child) for index, child in enumerate(node))
    return None


class JSONObjectField(serializers.DictField):
    """A JSON object of any values, storable as is and at most ``MAX_EXTRA_BYTES`` as JSON."""

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        value: dict[str, Any] = super().to_internal_value(data)
        where = _nul_path(value)
        if where is not None:
            raise serializers.ValidationError(
                NUL_MESSAGE.format(where=f"{self.field_name}{where}"), code="null_characters"
            )
        problem = json_value_problem(value)  # the rule of every route that stores JSON
        if problem is not None:
            raise serializers.ValidationError(
                f"Cannot be stored: {problem.describe(self.field_name or '')}.", code=problem.code
            )
        limit = settings.OPERATOR_API["MAX_EXTRA_BYTES"]
        size = len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())
        if size > limit:
            raise serializers.ValidationError(
                f"Must be at most {limit} bytes as JSON, got {size}.", code="max_length"
            )
        return value


class StrictInputSerializer(serializers.Serializer[Any]):
    """Refuses fields it does not define (a misspelt optional field is an error, not a no-op)."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                expected = ", ".join(self.fields)
                raise serializers.ValidationError(
                    {name: [f"Unknown field; expected {expected}."] for name in unknown}
                )
        return super().to_internal_value(data)


class AssetEventCreateSerializer(StrictInputSerializer):
    name = StrictCharField(
        required=False,
        max_length=NAME_LENGTH,
        trim_whitespace=False,
        help_text="The asset's name. With the uri: that asset; alone: the active asset with "
        "this name, else the only asset with it.",
    )
    uri = StrictCharField(
        required=False,
        max_length=NAME_LENGTH,
        trim_whitespace=False,
        help_text="The asset's uri (as stored); alone, chosen like a name alone.",
    )
    extra = JSONObjectField(required=False, help_text="The event's extra (a JSON object).")
    partition_key = StrictCharField(
        required=False,
        allow_null=True,
        max_length=PARTITION_KEY_LENGTH,
        trim_whitespace=False,
        help_text="A partition key; a partitioned event does not queue the (non-partitioned) "
        "consumer DAGs.",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if not attrs.get("name") and not attrs.get("uri"):
            raise serializers.ValidationError(
                {"name": ["Give the asset's name, its uri or both."]}, code="required"
            )
        return attrs


class DagPatchSerializer(StrictInputSerializer):
    is_paused = StrictBooleanField(help_text="Pause (true) or unpause (false) the DAG.")


class StrictDateTimeField(serializers.DateTimeField):
    """An ISO 8601 date-time with a timezone, within years 1 to 9999 in UTC (the operator API's
    one datetime rule, :func:`operatorapi.params.parse_datetime_parameter`)."""

    def to_internal_value(self, value: Any) -> datetime:
        if not isinstance(value, str):
            raise serializers.ValidationError("Must be an ISO 8601 date-time.", code="invalid")
        try:
            return parse_datetime_parameter(value, require_offset=True)
        except DatetimeParameterError as exc:
            raise serializers.ValidationError(str(exc), code="invalid") from None


class DagRunTriggerSerializer(StrictInputSerializer):
    run_id = StrictCharField(
        required=False,
        min_length=1,
        max_length=ID_LENGTH,
        trim_whitespace=False,
        help_text="The run's id (default `manual__<logical date>`).",
    )
    logical_date = StrictDateTimeField(
        required=False, help_text="ISO 8601 with a timezone (default now)."
    )
    conf = JSONObjectField(required=False, help_text="The run's conf (a JSON object).")


class DagRunClearSerializer(StrictInputSerializer):
    task_ids = serializers.ListField(
        child=StrictCharField(min_length=1, max_length=250),
        required=False,
        max_length=1000,
        help_text="Only these tasks of the run (default: all of them).",
    )
    only_failed = StrictBooleanField(
        required=False, default=False, help_text="Only failed and upstream_failed ones."
    )
    dry_run = StrictBooleanField(
        required=False, default=False, help_text="Say what would be cleared; change nothing."
    )


class ClearedTaskInstanceSerializer(serializers.Serializer[Any]):
    task_instance = serializers.CharField(source="label", help_text="dag.task[map] @ run")
    previous_state = serializers.CharField(allow_null=True)
    try_number = serializers.IntegerField(help_text="The new try's number.")
    max_tries = serializers.IntegerField()
    task_instance_id = serializers.UUIDField(
        help_text="The new try's id (the current one in a dry run)."
    )


class LeftAloneSerializer(serializers.Serializer[Any]):
    task_instance = serializers.CharField(help_text="dag.task[map] @ run")
    state = serializers.CharField(allow_null=True)


class ClearResultSerializer(serializers.Serializer[Any]):
    dry_run = serializers.BooleanField()
    cleared = ClearedTaskInstanceSerializer(many=True)
    left_alone = LeftAloneSerializer(many=True, help_text="Selected, not finished: unchanged.")
    runs_requeued = serializers.ListField(
        child=serializers.CharField(), help_text="Finished runs now back to queued (dag / run)."
    )


class StrictInputSerializerSchema(OpenApiSerializerExtension):  # type: ignore[no-untyped-call]  # drf-spectacular registry hook
    """In the OpenAPI schema a :class:`StrictInputSerializer` body takes no other properties
    (``additionalProperties: false``), as the server refuses them with a 400."""

    target_class = "operatorapi.serializers.StrictInputSerializer"
    match_subclasses = True

    def map_serializer(self, auto_schema: AutoSchema, direction: Direction) -> Any:
        schema = auto_schema._map_basic_serializer(self.target, direction)  # type: ignore[no-untyped-call]
        schema["additionalProperties"] = False
        return schema


# --- the executor -------------------------------------------------------------------------------


class QueueDepthSerializer(serializers.Serializer[Any]):
    queue = serializers.CharField(help_text="the task queue (a task's `queue`)")
    queued = serializers.IntegerField(help_text="task instances handed over, not started")
    scheduled = serializers.IntegerField(help_text="runnable task instances not handed over yet")
    oldest_queued_at = serializers.DateTimeField(allow_null=True)
    oldest_wait_seconds = serializers.FloatField(
        allow_null=True, help_text="how long the oldest queued task instance has waited"
    )


class WorkerSeenSerializer(serializers.Serializer[Any]):
    name = serializers.CharField(help_text="the Celery worker's node name")
    queues = serializers.ListField(child=serializers.CharField())


class ExecutorStateSerializer(serializers.Serializer[Any]):
    executor = serializers.ChoiceField(choices=["local", "celery"])
    queues = QueueDepthSerializer(many=True)
    workers = WorkerSeenSerializer(many=True, help_text="Celery workers that answered")
    workers_error = serializers.CharField(help_text="why the workers are unknown, else empty")
