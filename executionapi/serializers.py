"""Input and output serializers of the execution API.

Inputs are strict (unknown keys → 422, naive datetimes → 422) and normalize both accepted
wire formats of a success payload — Airflow 3's and the seed's — into the typed values of
``assets_app.outlets``; the state payloads become the typed payloads of
``assets_app.services.task_instances``. Outputs describe the responses (and the OpenAPI schema).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.exceptions import ErrorDetail

from assets_app.models import (
    ID_LENGTH,
    NAME_LENGTH,
    PARTITION_KEY_LENGTH,
    TaskInstance,
    TaskInstanceState,
    XCom,
)
from assets_app.outlets import (
    AliasOutletEvent,
    AssetOutletEvent,
    OutletProfile,
    OutletType,
)
from assets_app.services.task_instances import (
    KEEP,
    DeferredPayload,
    ReschedulePayload,
    RetryPayload,
    RunStart,
    StatePayload,
    SuccessPayload,
    TerminalPayload,
)
from task_sdk.definitions import AssetUniqueKey

# --- fields -------------------------------------------------------------------------------


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


#: A JSON value holding U+0000 cannot be stored (PostgreSQL's ``jsonb`` and text reject it).
NUL_MESSAGE = "Input should not contain NUL characters (\\u0000)"


def nul_character_path(value: Any) -> list[str | int] | None:
    """Where in a JSON value a string (or object key) holds U+0000, or ``None``."""
    stack: list[tuple[list[str | int], Any]] = [([], value)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, str):
            if "\x00" in node:
                return path
        elif isinstance(node, dict):
            for key, child in node.items():
                if "\x00" in key:
                    return [*path, key]
                stack.append(([*path, key], child))
        elif isinstance(node, list):
            stack.extend(([*path, index], child) for index, child in enumerate(node))
    return None


#: The largest value of the integer columns the API writes (``pid``, ``map_index``): 32-bit.
INTEGER_MAX = 2**31 - 1


def name_field(**kwargs: Any) -> serializers.CharField:
    return serializers.CharField(
        min_length=1, max_length=NAME_LENGTH, trim_whitespace=False, **kwargs
    )


def rendered_map_index_field() -> serializers.CharField:
    """Optional; omitted keeps the stored value (``KEEP``), ``null`` clears it."""
    length = TaskInstance._meta.get_field("rendered_map_index").max_length
    return serializers.CharField(
        max_length=length, required=False, allow_null=True, allow_blank=True, trim_whitespace=False
    )


class StrictSerializer(serializers.Serializer):
    """Rejects unknown keys (each named in the 422), like Airflow's ``extra="forbid"``."""

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, Mapping):
            raise serializers.ValidationError(
                {"non_field_errors": [ErrorDetail("Input should be a JSON object", "dict_type")]}
            )
        unknown = {
            key: [ErrorDetail("Extra inputs are not permitted", "extra_forbidden")]
            for key in data
            if key not in self.fields
        }
        try:
            value = super().to_internal_value(data)
        except serializers.ValidationError as exc:
            if unknown and isinstance(exc.detail, dict):
                raise serializers.ValidationError({**exc.detail, **unknown}) from exc
            raise
        if unknown:
            raise serializers.ValidationError(unknown)
        return value


# --- outlet events: both wire formats -------------------------------------------------------

_ASSET_KEY_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": NAME_LENGTH},
        "uri": {"type": "string", "minLength": 1, "maxLength": NAME_LENGTH},
    },
    "required": ["name", "uri"],
    "additionalProperties": False,
}
_PARTITION_KEY_SCHEMA = {
    "type": "string",
    "nullable": True,
    "minLength": 1,
    "maxLength": PARTITION_KEY_LENGTH,
}
_ALIAS_EVENT_SCHEMA = {
    "type": "object",
    "title": "AliasOutletEvent",
    "description": "An event emitted through an alias (outlet_events[alias].add(...)).",
    "properties": {
        "source_alias_name": {"type": "string", "minLength": 1, "maxLength": NAME_LENGTH},
        "dest_asset_key": _ASSET_KEY_SCHEMA,
        "dest_asset_extra": {"type": "object", "additionalProperties": True},
        "extra": {"type": "object", "additionalProperties": True},
        "partition_key": _PARTITION_KEY_SCHEMA,
    },
    "required": ["source_alias_name", "dest_asset_key"],
    "additionalProperties": False,
}
_OUTLET_EVENT_SCHEMA = {
    "oneOf": [
        {
            "type": "object",
            "title": "AssetOutletEvent",
            "description": "What the task wrote for a declared asset (outlet_events[asset]).",
            "properties": {
                "dest_asset_key": _ASSET_KEY_SCHEMA,
                "extra": {"type": "object", "additionalProperties": True},
                "partition_key": _PARTITION_KEY_SCHEMA,
            },
            "required": ["dest_asset_key"],
            "additionalProperties": False,
        },
        _ALIAS_EVENT_SCHEMA,
        {
            "type": "object",
            "title": "SeedOutletEventAccessor",
            "description": "Seed format: an accessor with its key, extra and nested alias events.",
            "properties": {
                "key": {
                    "type": "object",
                    "properties": {"name": {"type": "string"}, "uri": {"type": "string"}},
                    "required": ["name"],
                },
                "extra": {"type": "object", "additionalProperties": True},
                "partition_key": _PARTITION_KEY_SCHEMA,
                "asset_alias_events": {"type": "array", "items": _ALIAS_EVENT_SCHEMA},
            },
            "required": ["key"],
            "additionalProperties": False,
        },
    ]
}


class _Errors:
    """Collects field errors as the nested dict DRF uses, keyed by field name or index."""

    def __init__(self) -> None:
        self.tree: dict[Any, Any] = {}

    def add(self, loc: tuple[Any, ...], message: str, code: str) -> None:
        node = self.tree
        for part in loc[:-1]:
            node = node.setdefault(part, {})
        node.setdefault(loc[-1], []).append(ErrorDetail(message, code))

    def __bool__(self) -> bool:
        return bool(self.tree)


def _string(
    errors: _Errors,
    loc: tuple[Any, ...],
    value: Any,
    *,
    max_length: int = NAME_LENGTH,
    nullable: bool = False,
    not_blank: bool = False,
) -> str | None:
    if value is None:
        if not nullable:
            errors.add(loc, "Input should be a valid string", "string_type")
        return None
    if not isinstance(value, str):
        errors.add(loc, "Input should be a valid string", "string_type")
        return None
    if len(value) < 1:
        errors.add(loc, "String should have at least 1 character", "string_too_short")
    elif len(value) > max_length:
        errors.add(loc, f"String should have at most {max_length} characters", "string_too_long")
    elif "\x00" in value:
        errors.add(loc, NUL_MESSAGE, "null_characters_not_allowed")
    elif not_blank and not value.strip():
        errors.add(loc, "String should not be only whitespace", "string_blank")
    return value


def _object(errors: _Errors, loc: tuple[Any, ...], item: Mapping[str, Any], key: str) -> dict:
    if key not in item:
        return {}
    value = item[key]
    if not isinstance(value, dict):
        errors.add((*loc, key), "Input should be a JSON object", "dict_type")
        return {}
    if nul_character_path(value) is not None:
        errors.add((*loc, key), NUL_MESSAGE, "null_characters_not_allowed")
        return {}
    return value


def _forbid_extra(
    errors: _Errors, loc: tuple[Any, ...], item: Mapping[str, Any], allowed: frozenset[str]
) -> None:
    for key in item:
        if key not in allowed:
            errors.add((*loc, key), "Extra inputs are not permitted", "extra_forbidden")


def _asset_key(errors: _Errors, loc: tuple[Any, ...], value: Any) -> AssetUniqueKey | None:
    if not isinstance(value, dict):
        errors.add(loc, "Input should be a JSON object with name and uri", "dict_type")
        return None
    _forbid_extra(errors, loc, value, frozenset({"name", "uri"}))
    name = _string(errors, (*loc, "name"), value.get("name"))
    uri = _string(errors, (*loc, "uri"), value.get("uri"))
    if name is None or uri is None:
        return None
    return AssetUniqueKey(name=name, uri=uri)


def _partition_key(errors: _Errors, loc: tuple[Any, ...], item: Mapping[str, Any]) -> str | None:
    return _string(
        errors,
        (*loc, "partition_key"),
        item.get("partition_key"),
        max_length=PARTITION_KEY_LENGTH,
        nullable=True,
        not_blank=True,
    )


_ASSET_EVENT_KEYS = frozenset({"dest_asset_key", "extra", "partition_key"})
_ALIAS_EVENT_KEYS = frozenset(
    {"source_alias_name", "dest_asset_key", "dest_asset_extra", "extra", "partition_key"}
)
_ACCESSOR_KEYS = frozenset({"key", "extra", "partition_key", "asset_alias_events"})


def _alias_event(errors: _Errors, loc: tuple[Any, ...], item: Any) -> AliasOutletEvent | None:
    if not isinstance(item, dict):
        errors.add(loc, "Input should be a JSON object", "dict_type")
        return None
    _forbid_extra(errors, loc, item, _ALIAS_EVENT_KEYS)
    alias = _string(errors, (*loc, "source_alias_name"), item.get("source_alias_name"))
    key = _asset_key(errors, (*loc, "dest_asset_key"), item.get("dest_asset_key"))
    extra = _object(errors, loc, item, "extra")
    dest_asset_extra = _object(errors, loc, item, "dest_asset_extra")
    partition_key = _partition_key(errors, loc, item)
    if alias is None or key is None:
        return None
    return AliasOutletEvent(
        source_alias_name=alias,
        dest_asset_key=key,
        extra=extra,
        dest_asset_extra=dest_asset_extra,
        partition_key=partition_key,
    )


def parse_outlet_events(
    data: Any, *, max_events: int
) -> tuple[list[AssetOutletEvent | AliasOutletEvent], dict[Any, Any]]:
    """Parse ``outlet_events`` in any accepted form; returns (events, DRF-style error tree)."""
    errors = _Errors()
    events: list[AssetOutletEvent | AliasOutletEvent] = []
    if not isinstance(data, list):
        return [], {"non_field_errors": [ErrorDetail("Input should be a valid list", "list_type")]}
    if len(data) > max_events:
        message = f"At most {max_events} outlet events are accepted per request"
        return [], {"non_field_errors": [ErrorDetail(message, "too_long")]}
    for index, item in enumerate(data):
        loc: tuple[Any, ...] = (index,)
        if not isinstance(item, dict):
            errors.add(loc, "Input should be a JSON object", "dict_type")
        elif "key" in item:  # seed format: an accessor with nested alias events
            _forbid_extra(errors, loc, item, _ACCESSOR_KEYS)
            key = item["key"]
            extra = _object(errors, loc, item, "extra")
            partition_key = _partition_key(errors, loc, item)
            if isinstance(key, dict) and key.get("uri") is not None:
                asset_key = _asset_key(errors, (*loc, "key"), key)
                if asset_key is not None:
                    events.append(
                        AssetOutletEvent(key=asset_key, extra=extra, partition_key=partition_key)
                    )
            else:  # an alias's accessor: only its nested alias events count
                _string(
                    errors,
                    (*loc, "key", "name"),
                    key.get("name") if isinstance(key, dict) else None,
                )
            nested = item.get("asset_alias_events") or []
            if not isinstance(nested, list):
                errors.add(
                    (*loc, "asset_alias_events"), "Input should be a valid list", "list_type"
                )
                nested = []
            for sub_index, sub in enumerate(nested):
                alias_event = _alias_event(errors, (*loc, "asset_alias_events", sub_index), sub)
                if alias_event is not None:
                    events.append(alias_event)
        elif "source_alias_name" in item:
            alias_event = _alias_event(errors, loc, item)
            if alias_event is not None:
                events.append(alias_event)
        elif "dest_asset_key" in item:
            _forbid_extra(errors, loc, item, _ASSET_EVENT_KEYS)
            asset_key = _asset_key(errors, (*loc, "dest_asset_key"), item["dest_asset_key"])
            extra = _object(errors, loc, item, "extra")
            partition_key = _partition_key(errors, loc, item)
            if asset_key is not None:
                events.append(
                    AssetOutletEvent(key=asset_key, extra=extra, partition_key=partition_key)
                )
        else:
            errors.add(
                loc,
                "Unrecognized outlet event: expected dest_asset_key, source_alias_name or key",
                "union_tag_not_found",
            )
    if len(events) > max_events:
        message = f"At most {max_events} outlet events are accepted per request"
        return [], {"non_field_errors": [ErrorDetail(message, "too_long")]}
    return events, errors.tree


@extend_schema_field({"type": "array", "items": _OUTLET_EVENT_SCHEMA, "nullable": True})
class OutletEventsField(serializers.Field):
    """``outlet_events``: Airflow 3 asset and alias events, or the seed's accessor form.

    Hand-parsed (not nested serializers) so that 10,000 events validate quickly.
    """

    def to_internal_value(self, data: Any) -> list[AssetOutletEvent | AliasOutletEvent]:
        if data is None:
            return []
        events, errors = parse_outlet_events(
            data, max_events=settings.EXECUTION_API["MAX_OUTLET_EVENTS"]
        )
        if errors:
            raise serializers.ValidationError(errors)
        return events

    def to_representation(self, value: Any) -> Any:  # input only
        return value


# --- state payloads ---------------------------------------------------------------------------

OUTLET_TYPES = [t.value for t in OutletType]


_REQUIRED_BY_TYPE = {
    OutletType.ASSET: ("name", "uri"),
    OutletType.NAME_REF: ("name",),
    OutletType.URI_REF: ("uri",),
    OutletType.ALIAS: ("name",),
}


class AssetProfileSerializer(StrictSerializer):
    """A declared outlet, validated into an :class:`OutletProfile`.

    ``asset_type`` (seed format) is an alias of ``type``; a profile with neither takes the
    payload's top-level ``asset_type`` (seed format). Checked per profile, so that a 422 names
    a profile's missing fields together with every other bad field of the payload.
    """

    name = name_field(required=False, allow_null=True)
    uri = name_field(required=False, allow_null=True)
    type = serializers.ChoiceField(choices=OUTLET_TYPES, required=False, allow_null=True)
    asset_type = serializers.ChoiceField(choices=OUTLET_TYPES, required=False, allow_null=True)

    def validate(self, attrs: dict[str, Any]) -> OutletProfile:  # type: ignore[override]
        own, alias = attrs.get("type"), attrs.get("asset_type")
        if own and alias and own != alias:
            raise serializers.ValidationError(
                {"asset_type": [ErrorDetail("Contradicts type", "value_error")]}
            )
        kind = own or alias or self._payload_asset_type()
        if kind is None:
            raise serializers.ValidationError({"type": [ErrorDetail("Field required", "missing")]})
        kind = OutletType(kind)
        missing = {
            field_name: [ErrorDetail(f"Required for {kind.value}", "missing")]
            for field_name in _REQUIRED_BY_TYPE[kind]
            if not attrs.get(field_name)
        }
        if missing:
            raise serializers.ValidationError(missing)
        return OutletProfile(
            type=kind,
            name=attrs.get("name") if kind != OutletType.URI_REF else None,
            uri=attrs.get("uri") if kind not in (OutletType.NAME_REF, OutletType.ALIAS) else None,
        )

    def _payload_asset_type(self) -> str | None:
        """The top-level ``asset_type`` of the payload holding this profile, when valid."""
        payload = getattr(self.root, "initial_data", None)
        top_type = payload.get("asset_type") if isinstance(payload, Mapping) else None
        return top_type if top_type in OUTLET_TYPES else None


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
    task_outlets = serializers.ListField(
        child=AssetProfileSerializer(), required=False, allow_null=True
    )
    outlet_events = OutletEventsField(required=False, allow_null=True)
    rendered_map_index = rendered_map_index_field()
    asset_type = serializers.ChoiceField(choices=OUTLET_TYPES, required=False, allow_null=True)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        profiles: list[OutletProfile] = list(attrs.get("task_outlets") or [])
        events = attrs.get("outlet_events") or []
        if (
            attrs.get("asset_type") is not None
        ):  # seed format: aliases named in alias events are declared
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


class TITerminalStatePayloadSerializer(BasePayloadSerializer):
    """``failed``, ``skipped``, ``removed`` or ``upstream_failed``."""

    state = serializers.ChoiceField(choices=["failed", "skipped", "removed", "upstream_failed"])
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
    retry_delay_seconds = serializers.FloatField(required=False, allow_null=True)
    retry_reason = serializers.CharField(
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


class JSONObjectOrStringField(serializers.JSONField):
    default_error_messages = {
        "invalid_kind": "Input should be a JSON object, a string or null",
        "null_characters_not_allowed": NUL_MESSAGE,
    }

    def to_internal_value(self, data: Any) -> Any:
        if data is not None and not isinstance(data, dict | str):
            self.fail("invalid_kind")
        if nul_character_path(data) is not None:
            self.fail("null_characters_not_allowed")
        return data


class TIDeferredStatePayloadSerializer(BasePayloadSerializer):
    """``deferred``: the trigger to run and the method to resume with."""

    state = serializers.ChoiceField(choices=[TaskInstanceState.DEFERRED.value])
    classpath = serializers.CharField(max_length=1000)
    trigger_kwargs = JSONObjectOrStringField(required=False, allow_null=True)
    trigger_timeout = serializers.DurationField(required=False, allow_null=True)
    queue = serializers.CharField(required=False, allow_null=True, allow_blank=True)
    next_method = serializers.CharField(max_length=1000)
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
    "failed": TITerminalStatePayloadSerializer,
    "skipped": TITerminalStatePayloadSerializer,
    "removed": TITerminalStatePayloadSerializer,
    "upstream_failed": TITerminalStatePayloadSerializer,
    "up_for_retry": TIRetryStatePayloadSerializer,
    "up_for_reschedule": TIRescheduleStatePayloadSerializer,
    "deferred": TIDeferredStatePayloadSerializer,
}


class TIEnterRunningPayloadSerializer(StrictSerializer):
    state = serializers.ChoiceField(choices=[TaskInstanceState.RUNNING.value])
    hostname = serializers.CharField(max_length=1000)
    unixname = serializers.CharField(max_length=1000)
    pid = serializers.IntegerField(min_value=0, max_value=INTEGER_MAX)
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
    hostname = serializers.CharField(max_length=1000)
    pid = serializers.IntegerField()


# --- query parameters -------------------------------------------------------------------------


class AssetByNameQuerySerializer(serializers.Serializer):
    name = name_field()


class AssetByUriQuerySerializer(serializers.Serializer):
    uri = name_field()


class AssetEventsQuerySerializer(serializers.Serializer):
    """Filters of the ``/asset-events`` routes; ``after``/``before`` are inclusive."""

    after = AwareDateTimeField(required=False, allow_null=True)
    before = AwareDateTimeField(required=False, allow_null=True)
    ascending = serializers.BooleanField(required=False, default=True)
    limit = serializers.IntegerField(required=False, allow_null=True, min_value=1)


class AssetEventsByAssetQuerySerializer(AssetEventsQuerySerializer):
    name = name_field(required=False, allow_null=True, allow_blank=True)
    uri = name_field(required=False, allow_null=True, allow_blank=True)


class AssetEventsByAliasQuerySerializer(AssetEventsQuerySerializer):
    name = name_field()


class XComPathSerializer(serializers.Serializer):
    """The path parameters of the XCom routes, within the ``xcom`` columns."""

    dag_id = serializers.CharField(max_length=ID_LENGTH)
    run_id = serializers.CharField(max_length=ID_LENGTH)
    task_id = serializers.CharField(max_length=ID_LENGTH)
    key = serializers.CharField(max_length=XCom._meta.get_field("key").max_length)


class XComQuerySerializer(serializers.Serializer):
    map_index = serializers.IntegerField(
        required=False, default=-1, min_value=-1, max_value=INTEGER_MAX
    )
    include_prior_dates = serializers.BooleanField(required=False, default=False)
    dag_result = serializers.BooleanField(required=False, default=False)
    mapped_length = serializers.IntegerField(required=False, allow_null=True, min_value=0)


# --- outputs ------------------------------------------------------------------------------------


class MessageSerializer(serializers.Serializer):
    message = serializers.CharField()


class ErrorDetailSerializer(serializers.Serializer):
    reason = serializers.CharField()
    message = serializers.CharField()


class ErrorResponseSerializer(serializers.Serializer):
    detail = ErrorDetailSerializer()


class ValidationErrorItemSerializer(serializers.Serializer):
    loc = serializers.ListField(child=serializers.JSONField())
    msg = serializers.CharField()
    type = serializers.CharField()


class ValidationErrorResponseSerializer(serializers.Serializer):
    detail = ValidationErrorItemSerializer(many=True)


class AssetResponseSerializer(serializers.Serializer):
    name = serializers.CharField()
    uri = serializers.CharField()
    group = serializers.CharField()
    extra = serializers.JSONField()


class AssetProfileResponseSerializer(serializers.Serializer):
    name = serializers.CharField(allow_null=True)
    uri = serializers.CharField(allow_null=True)
    type = serializers.CharField()


class InactiveAssetsResponseSerializer(serializers.Serializer):
    inactive_assets = AssetProfileResponseSerializer(many=True)


class DagRunAssetReferenceSerializer(serializers.Serializer):
    run_id = serializers.CharField()
    dag_id = serializers.CharField()
    logical_date = serializers.DateTimeField(allow_null=True)
    start_date = serializers.DateTimeField(allow_null=True)
    end_date = serializers.DateTimeField(allow_null=True)
    state = serializers.CharField()
    data_interval_start = serializers.DateTimeField(allow_null=True)
    data_interval_end = serializers.DateTimeField(allow_null=True)
    partition_key = serializers.CharField(allow_null=True)


class AssetEventResponseSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    timestamp = serializers.DateTimeField()
    extra = serializers.JSONField()
    asset = AssetResponseSerializer()
    created_dagruns = DagRunAssetReferenceSerializer(many=True)
    source_task_id = serializers.CharField(allow_null=True)
    source_dag_id = serializers.CharField(allow_null=True)
    source_run_id = serializers.CharField(allow_null=True)
    source_map_index = serializers.IntegerField(allow_null=True)
    partition_key = serializers.CharField(allow_null=True)


class AssetEventsResponseSerializer(serializers.Serializer):
    asset_events = AssetEventResponseSerializer(many=True)


class ConsumedAssetSerializer(serializers.Serializer):
    name = serializers.CharField()
    uri = serializers.CharField()
    extra = serializers.JSONField()


class AliasNameSerializer(serializers.Serializer):
    name = serializers.CharField()


class ConsumedAssetEventSerializer(serializers.Serializer):
    """An event that triggered the run, in the shape the real task SDK accepts."""

    asset = ConsumedAssetSerializer()
    extra = serializers.JSONField()
    source_task_id = serializers.CharField(allow_null=True)
    source_dag_id = serializers.CharField(allow_null=True)
    source_run_id = serializers.CharField(allow_null=True)
    source_map_index = serializers.IntegerField(allow_null=True)
    source_aliases = AliasNameSerializer(many=True)
    timestamp = serializers.DateTimeField()
    partition_key = serializers.CharField(allow_null=True)


class DagRunContextSerializer(serializers.Serializer):
    """The twelve ``dag_run`` keys of the run context; nulls explicit, datetimes with tz."""

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
    consumed_asset_events = ConsumedAssetEventSerializer(many=True)
    partition_key = serializers.CharField(allow_null=True)


class TIRunContextSerializer(serializers.Serializer):
    dag_run = DagRunContextSerializer()
    max_tries = serializers.IntegerField()
    task_reschedule_count = serializers.IntegerField()
    variables = serializers.ListField(child=serializers.JSONField())
    connections = serializers.ListField(child=serializers.JSONField())
    upstream_map_indexes = serializers.JSONField(allow_null=True)
    next_method = serializers.CharField(allow_null=True)
    next_kwargs = serializers.JSONField(allow_null=True)
    should_retry = serializers.BooleanField()


class XComResponseSerializer(serializers.Serializer):
    key = serializers.CharField()
    value = serializers.JSONField(allow_null=True)
