"""``/task-instances/{id}/…``: the state payloads, ``/run`` and its run context, heartbeats,
rendered fields and the inactive declared assets.

Each state payload becomes the typed payload of ``assets_app.services.runs.state``; the
run context is rendered from ``claims.RunStartResult``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from django.utils import timezone
from drf_spectacular.extensions import OpenApiSerializerExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import Direction, extend_schema_field
from rest_framework import serializers
from rest_framework.exceptions import ErrorDetail

from assets_app.models import (
    FINISHED_TI_STATES,
    Asset,
    AssetEvent,
    DagRun,
    TaskInstance,
    TaskInstanceState,
)
from assets_app.outlets import AliasOutletEvent, OutletProfile, OutletType
from assets_app.services.runs.claims import RunStart, RunStartResult
from assets_app.services.runs.state import (
    KEEP,
    DeferredPayload,
    ReschedulePayload,
    RetryPayload,
    StatePayload,
    SuccessPayload,
    TerminalPayload,
)
from assets_app.validators import validate_id
from executionapi.serializers.common import (
    INTEGER_MAX,
    AwareDateTimeField,
    JSONIntegerField,
    JSONNumberField,
    JSONStringField,
    StrictSerializer,
    checked_json_value,
)
from executionapi.serializers.outlets import (
    OUTLET_TYPES,
    PAYLOAD_ASSET_TYPE,
    AssetProfileSerializer,
    OutletEventsField,
)

# --- PATCH state ----------------------------------------------------------------------------


def rendered_map_index_field() -> JSONStringField:
    """Optional; omitted keeps the stored value (``KEEP``), ``null`` clears it."""
    length = TaskInstance._meta.get_field("rendered_map_index").max_length
    return JSONStringField(
        max_length=length, required=False, allow_null=True, allow_blank=True, trim_whitespace=False
    )


class BasePayloadSerializer(StrictSerializer):
    def payload(self) -> StatePayload:
        raise NotImplementedError


class TISuccessStatePayloadSerializer(BasePayloadSerializer):
    """``success``: the declared outlets and what the task wrote for them.

    Seed format: a top-level ``asset_type`` types every profile lacking its own ``type``,
    and every alias named in an alias event counts as declared.
    """

    state = serializers.ChoiceField(choices=[TaskInstanceState.SUCCESS.value])
    end_date = AwareDateTimeField()
    task_outlets = AssetProfileSerializer(many=True, required=False, allow_null=True)
    outlet_events = OutletEventsField(required=False, allow_null=True)
    rendered_map_index = rendered_map_index_field()
    asset_type = serializers.ChoiceField(choices=OUTLET_TYPES, required=False, allow_null=True)

    def to_internal_value(self, data: Any) -> Any:
        top_type = data.get("asset_type") if isinstance(data, Mapping) else None
        token = PAYLOAD_ASSET_TYPE.set(top_type)  # for the profiles (seed format)
        try:
            return super().to_internal_value(data)
        finally:
            PAYLOAD_ASSET_TYPE.reset(token)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        profiles: list[OutletProfile] = list(attrs.get("task_outlets") or [])
        events = attrs.get("outlet_events") or []
        if attrs.get("asset_type") is not None:  # seed: aliases named in alias events count
            declared = {p.name for p in profiles if p.type == OutletType.ALIAS}
            for event in events:
                if isinstance(event, AliasOutletEvent) and event.source_alias_name not in declared:
                    declared.add(event.source_alias_name)
                    profiles.append(
                        OutletProfile(type=OutletType.ALIAS, name=event.source_alias_name)
                    )
        attrs["profiles"] = profiles
        attrs["outlet_events"] = events
        return attrs

    def payload(self) -> SuccessPayload:
        data = self.validated_data
        return SuccessPayload(
            end_date=data["end_date"],
            task_outlets=tuple(data["profiles"]),
            outlet_events=tuple(data["outlet_events"]),
            rendered_map_index=data.get("rendered_map_index", KEEP),
        )


class SuccessPayloadSchema(OpenApiSerializerExtension):  # type: ignore[no-untyped-call]  # drf-spectacular's registry hook
    """The success payload in the OpenAPI schema: Airflow 3's wire format. The seed format's
    top-level ``asset_type`` is accepted but not described (see ``AssetProfileSchema``)."""

    target_class = "executionapi.serializers.task_instances.TISuccessStatePayloadSerializer"
    priority = 1  # over StrictSerializerSchema

    def map_serializer(self, auto_schema: AutoSchema, direction: Direction) -> dict[str, Any]:
        schema: dict[str, Any] = auto_schema._map_serializer(  # type: ignore[no-untyped-call]
            self.target, direction, bypass_extensions=True
        )
        schema["additionalProperties"] = False
        schema["properties"].pop("asset_type", None)
        return schema


#: What ``TITerminalStatePayload`` reports: a finished state other than success (failed,
#: skipped, removed, upstream_failed, in the order ``TaskInstanceState`` declares them).
TERMINAL_PAYLOAD_STATES = [
    state.value
    for state in TaskInstanceState
    if state in FINISHED_TI_STATES and state != TaskInstanceState.SUCCESS
]


class TITerminalStatePayloadSerializer(BasePayloadSerializer):
    """A finished state other than success (:data:`TERMINAL_PAYLOAD_STATES`)."""

    state = serializers.ChoiceField(choices=TERMINAL_PAYLOAD_STATES)
    end_date = AwareDateTimeField()
    rendered_map_index = rendered_map_index_field()

    def payload(self) -> TerminalPayload:
        data = self.validated_data
        return TerminalPayload(
            state=TaskInstanceState(data["state"]),
            end_date=data["end_date"],
            rendered_map_index=data.get("rendered_map_index", KEEP),
        )


class TIRetryStatePayloadSerializer(BasePayloadSerializer):
    """``up_for_retry``."""

    state = serializers.ChoiceField(choices=[TaskInstanceState.UP_FOR_RETRY.value])
    end_date = AwareDateTimeField()
    rendered_map_index = rendered_map_index_field()
    retry_delay_seconds = JSONNumberField(required=False, allow_null=True)
    retry_reason = JSONStringField(
        required=False, allow_null=True, allow_blank=True, trim_whitespace=False
    )

    def payload(self) -> RetryPayload:
        data = self.validated_data
        return RetryPayload(
            end_date=data["end_date"],
            rendered_map_index=data.get("rendered_map_index", KEEP),
            retry_delay_seconds=data.get("retry_delay_seconds"),
            retry_reason=data.get("retry_reason"),
        )


class TIRescheduleStatePayloadSerializer(BasePayloadSerializer):
    """``up_for_reschedule``."""

    state = serializers.ChoiceField(choices=[TaskInstanceState.UP_FOR_RESCHEDULE.value])
    reschedule_date = AwareDateTimeField()
    end_date = AwareDateTimeField()

    def payload(self) -> ReschedulePayload:
        data = self.validated_data
        return ReschedulePayload(reschedule_date=data["reschedule_date"], end_date=data["end_date"])


#: The durations the schema describes (Django parses a few more): ``[DD ][[HH:]MM:]SS[.ffffff]``
#: or ISO 8601 ``[±]P[nD][T[nH][nM][n[.f]S]]`` as pydantic writes a ``timedelta``.
DURATION_PATTERN = (
    r"^(-?[0-9]{1,5} )?([0-9]{1,2}:)?([0-9]{1,2}:)?[0-9]{1,2}(\.[0-9]{1,6})?$"
    r"|^[-+]?P([0-9]{1,5}D)?(T([0-9]{1,2}H)?([0-9]{1,2}M)?([0-9]{1,2}(\.[0-9]{1,6})?S)?)?$"
)


@extend_schema_field({"type": "string", "pattern": DURATION_PATTERN})
class JSONDurationField(serializers.DurationField):
    """A duration of a JSON body: a string (``"1 00:00:00"``, ``"P1D"``), not a number."""

    default_error_messages = {"string_type": "Input should be a valid duration string"}

    def to_internal_value(self, value: Any) -> timedelta:
        if not isinstance(value, str):
            self.fail("string_type")
        return super().to_internal_value(value)


@extend_schema_field(
    {
        "anyOf": [{"type": "object", "additionalProperties": {}}, {"type": "string"}],
        "nullable": True,
    }
)
class JSONObjectOrStringField(serializers.JSONField):
    """``trigger_kwargs``/``next_kwargs``: an object, a (serialized) string or null, storable
    (:func:`~executionapi.serializers.common.json_value_error`)."""

    default_error_messages = {"invalid_kind": "Input should be a JSON object, a string or null"}

    def to_internal_value(self, data: Any) -> Any:
        if data is not None and not isinstance(data, dict | str):
            self.fail("invalid_kind")
        return checked_json_value(data)


class TIDeferredStatePayloadSerializer(BasePayloadSerializer):
    """``deferred``: the trigger to run and the method to resume with."""

    state = serializers.ChoiceField(choices=[TaskInstanceState.DEFERRED.value])
    classpath = JSONStringField(min_length=1, max_length=1000)
    trigger_kwargs = JSONObjectOrStringField(required=False, allow_null=True)
    trigger_timeout = JSONDurationField(required=False, allow_null=True)
    queue = JSONStringField(required=False, allow_null=True, allow_blank=True)
    next_method = JSONStringField(min_length=1, max_length=1000)
    next_kwargs = JSONObjectOrStringField(required=False, allow_null=True)
    rendered_map_index = rendered_map_index_field()

    def validate_trigger_timeout(self, value: timedelta | None) -> timedelta | None:
        try:
            if value is not None:
                timezone.now() + value  # the service stores now + timeout
        except OverflowError as exc:
            raise serializers.ValidationError("Timeout is out of range", "value_error") from exc
        return value

    def payload(self) -> DeferredPayload:
        data = self.validated_data
        return DeferredPayload(
            classpath=data["classpath"],
            next_method=data["next_method"],
            trigger_kwargs=data.get("trigger_kwargs"),
            trigger_timeout=data.get("trigger_timeout"),
            next_kwargs=data.get("next_kwargs"),
            rendered_map_index=data.get("rendered_map_index", KEEP),
            queue=data.get("queue"),
        )


#: ``PATCH /task-instances/{id}/state`` dispatches on the body's ``state``.
STATE_PAYLOAD_SERIALIZERS: dict[str, type[BasePayloadSerializer]] = {
    "success": TISuccessStatePayloadSerializer,
    **dict.fromkeys(TERMINAL_PAYLOAD_STATES, TITerminalStatePayloadSerializer),
    "up_for_retry": TIRetryStatePayloadSerializer,
    "up_for_reschedule": TIRescheduleStatePayloadSerializer,
    "deferred": TIDeferredStatePayloadSerializer,
}


def state_payload_serializer(data: Any) -> BasePayloadSerializer:
    """The serializer of a state payload, chosen by its ``state`` (else a 422 on ``state``)."""
    state = data.get("state") if isinstance(data, dict) else None
    serializer_class = STATE_PAYLOAD_SERIALIZERS.get(state) if isinstance(state, str) else None
    if serializer_class is None:
        expected = ", ".join(f"'{name}'" for name in STATE_PAYLOAD_SERIALIZERS)
        message = (
            f"Input tag {state!r} found using 'state' does not match any of the expected tags: "
            f"{expected}"
        )
        raise serializers.ValidationError({"state": [ErrorDetail(message, "union_tag_invalid")]})
    return serializer_class(data=data)


# --- PATCH run, PUT heartbeat ---------------------------------------------------------------


class TIEnterRunningPayloadSerializer(StrictSerializer):
    state = serializers.ChoiceField(choices=[TaskInstanceState.RUNNING.value])
    hostname = JSONStringField(min_length=1, max_length=1000)
    unixname = JSONStringField(min_length=1, max_length=1000)
    pid = JSONIntegerField(min_value=0, max_value=INTEGER_MAX)
    start_date = AwareDateTimeField()

    def run_start(self) -> RunStart:
        data = self.validated_data
        return RunStart(
            hostname=data["hostname"],
            unixname=data["unixname"],
            pid=data["pid"],
            start_date=data["start_date"],
        )


class TIHeartbeatInfoSerializer(StrictSerializer):
    hostname = JSONStringField(min_length=1, max_length=1000)
    pid = JSONIntegerField()


@extend_schema_field(
    {
        "anyOf": [
            {"type": "string"},
            {  # [task_id, map_index] (OpenAPI 3.0 has no prefixItems)
                "type": "array",
                "items": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
                "minItems": 2,
                "maxItems": 2,
            },
        ]
    }
)
class TaskKeyField(serializers.Field[tuple[str, int], Any, Any, Any]):
    """A task id, or ``[task_id, map_index]`` (Airflow's ``str | tuple[str, int]``)."""

    def to_internal_value(self, data: Any) -> tuple[str, int]:
        if isinstance(data, str) and data:
            return (validate_task_id(data), -1)
        if (
            isinstance(data, list)
            and len(data) == 2
            and isinstance(data[0], str)
            and isinstance(data[1], int)
            and not isinstance(data[1], bool)
            and -1 <= data[1] <= INTEGER_MAX
        ):
            return (validate_task_id(data[0]), data[1])
        raise serializers.ValidationError(
            "expected a task id or a [task_id, map_index] pair", code="invalid"
        )

    def to_representation(self, value: tuple[str, int]) -> Any:
        return value[0] if value[1] == -1 else list(value)


def validate_task_id(value: str) -> str:
    try:
        return validate_id(value)
    except ValueError as exc:
        raise serializers.ValidationError(str(exc), code="invalid") from exc


class TISkippedDownstreamTasksSerializer(StrictSerializer):
    """``PATCH …/skip-downstream``: the tasks a branch or short-circuit leaves out."""

    tasks = serializers.ListField(child=TaskKeyField(), allow_empty=True, max_length=10_000)


# --- the run context (PATCH run's answer) ---------------------------------------------------


class ConsumedAssetSerializer(serializers.Serializer[Any]):
    """The asset of a consumed event; a deleted one is named empty (the client needs one)."""

    name = serializers.CharField()
    uri = serializers.CharField()
    extra = serializers.JSONField()

    def get_attribute(self, instance: AssetEvent) -> Asset:
        return instance.asset or Asset(name="", uri="", extra={})


class AliasNameSerializer(serializers.Serializer[Any]):
    name = serializers.CharField()


class ConsumedAssetEventSerializer(serializers.Serializer[AssetEvent]):
    """An event that triggered the run, in the shape the real task SDK accepts (its
    ``AssetEventDagRunReference`` forbids other keys: no ``id``, no ``asset.group``)."""

    asset = ConsumedAssetSerializer()
    extra = serializers.JSONField()
    source_task_id = serializers.CharField(allow_null=True)
    source_dag_id = serializers.CharField(allow_null=True)
    source_run_id = serializers.CharField(allow_null=True)
    source_map_index = serializers.IntegerField(allow_null=True)
    source_aliases = AliasNameSerializer(many=True)
    timestamp = serializers.DateTimeField()
    partition_key = serializers.CharField(allow_null=True)


class DagRunContextSerializer(serializers.Serializer[DagRun]):
    """The ``dag_run`` of the run context: the twelve keys Airflow's client requires and the
    run's ``conf`` (the task's ``dag_run.conf``, which overrides its ``params`` in Airflow's
    runner); nulls explicit, datetimes with tz.

    ``consumed_asset_events`` reads the run's prefetched ``consumed_events``
    (``executionapi.selectors.dag_run_consumed_events_prefetch``).
    """

    dag_id = serializers.CharField()
    run_id = serializers.CharField()
    logical_date = serializers.DateTimeField(allow_null=True)
    data_interval_start = serializers.DateTimeField(allow_null=True)
    data_interval_end = serializers.DateTimeField(allow_null=True)
    run_after = serializers.DateTimeField()
    start_date = serializers.DateTimeField(allow_null=True)
    end_date = serializers.DateTimeField(allow_null=True)
    run_type = serializers.CharField()
    state = serializers.CharField()
    conf = serializers.JSONField(allow_null=True)
    consumed_asset_events = ConsumedAssetEventSerializer(many=True, source="consumed_events")
    partition_key = serializers.CharField(allow_null=True)


class TIRunContextSerializer(serializers.Serializer[RunStartResult]):
    """``PATCH run``'s 200: the DAG run and the TI's retry bookkeeping.

    The registry keeps no variables or connections and maps no upstream tasks, but the
    client requires those keys.
    """

    dag_run = DagRunContextSerializer(source="task_instance.dag_run")
    max_tries = serializers.IntegerField(source="task_instance.max_tries")
    task_reschedule_count = serializers.IntegerField(source="task_instance.task_reschedule_count")
    variables = serializers.SerializerMethodField(method_name="nothing_kept")
    connections = serializers.SerializerMethodField(method_name="nothing_kept")
    upstream_map_indexes = serializers.SerializerMethodField()
    next_method = serializers.CharField(source="task_instance.next_method", allow_null=True)
    next_kwargs = serializers.JSONField(source="task_instance.next_kwargs", allow_null=True)
    should_retry = serializers.BooleanField()
    start_date = serializers.SerializerMethodField()

    @extend_schema_field(serializers.ListField(child=serializers.JSONField()))
    def nothing_kept(self, result: RunStartResult) -> list[Any]:
        return []

    @extend_schema_field(serializers.JSONField(allow_null=True))
    def get_upstream_map_indexes(self, result: RunStartResult) -> None:
        return None

    @extend_schema_field(serializers.DateTimeField(allow_null=True))
    def get_start_date(self, result: RunStartResult) -> str | None:
        """The first start of a try resuming from a deferral (Airflow sends it only then)."""
        ti = result.task_instance
        if not ti.next_method or ti.start_date is None:
            return None
        return serializers.DateTimeField().to_representation(ti.start_date)


# --- GET validate-inlets-and-outlets ----------------------------------------------------------


class AssetProfileResponseSerializer(serializers.Serializer[Asset]):
    """A declared ``Asset`` as the client's ``AssetProfile``."""

    name = serializers.CharField()
    uri = serializers.CharField()
    type = serializers.SerializerMethodField()

    @extend_schema_field(OpenApiTypes.STR)
    def get_type(self, asset: Asset) -> str:
        return OutletType.ASSET.value


class InactiveAssetsResponseSerializer(serializers.Serializer[Any]):
    inactive_assets = AssetProfileResponseSerializer(many=True)
