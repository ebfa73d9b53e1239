"""The outlets of a success payload: what the task declared and what it wrote for them.

Both accepted wire formats, Airflow 3's and the seed's, become the typed values of
``assets_app.outlets``. A payload may carry ``EXECUTION_API_MAX_OUTLET_EVENTS`` (10,000)
events and as many outlets, so the items are :class:`~executionapi.serializers.common.
LeanSerializer`\\ s; the OpenAPI schema is generated from these same classes.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from django.conf import settings
from drf_spectacular.extensions import OpenApiSerializerExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import Direction, PolymorphicProxySerializer, extend_schema_field
from rest_framework import serializers
from rest_framework.exceptions import ErrorDetail

from assets_app.models import NAME_LENGTH, PARTITION_KEY_LENGTH
from assets_app.outlets import (
    AliasOutletEvent,
    AssetOutletEvent,
    OutletEvent,
    OutletProfile,
    OutletType,
)
from executionapi.serializers.common import (
    NO_NUL_PATTERN,
    JSONObjectField,
    LeanSerializer,
    StrictStringField,
    name_field,
)
from task_sdk.definitions import AssetUniqueKey

OUTLET_TYPES = [t.value for t in OutletType]

_REQUIRED_BY_TYPE = {
    OutletType.ASSET: ("name", "uri"),
    OutletType.NAME_REF: ("name",),
    OutletType.URI_REF: ("uri",),
    OutletType.ALIAS: ("name",),
}


class AssetProfileSchema(OpenApiSerializerExtension):  # type: ignore[no-untyped-call]  # drf-spectacular's registry hook
    """In the OpenAPI schema a declared outlet is one of four shapes, told by its ``type`` (the
    Airflow 3 wire format), each with the keys that type requires. The seed format's
    ``asset_type`` (here, and at the top of the payload) is still accepted but not described:
    with it, a profile may lack ``type``, which no schema of the profile alone can say."""

    target_class = "executionapi.serializers.outlets.AssetProfileSerializer"
    priority = 1  # over StrictSerializerSchema

    def map_serializer(self, auto_schema: AutoSchema, direction: Direction) -> dict[str, Any]:
        text = {
            "type": "string",
            "minLength": 1,
            "maxLength": NAME_LENGTH,
            "pattern": NO_NUL_PATTERN,
        }
        ignored = {**text, "nullable": True}
        shapes = []
        for kind, required in _REQUIRED_BY_TYPE.items():
            properties = {
                # wrapped: drf-spectacular's enum hook would merge the four one-value enums
                # of one component into a single (wrong) one
                "type": {"allOf": [{"type": "string", "enum": [kind.value]}]},
                "name": text if "name" in required else ignored,
                "uri": text if "uri" in required else ignored,
            }
            shapes.append(
                {
                    "type": "object",
                    "title": kind.value,
                    "properties": properties,
                    "required": ["type", *required],
                    "additionalProperties": False,
                }
            )
        return {"oneOf": shapes}


class AssetProfileSerializer(LeanSerializer):
    """A declared outlet (``task_outlets[i]``), validated into an :class:`OutletProfile`.

    ``asset_type`` (seed format) is an alias of ``type``; a profile with neither takes the
    payload's top-level ``asset_type`` (seed format). Checked per profile, so that a 422 names
    a profile's missing fields together with every other bad field of the payload.
    """

    name = name_field(required=False, allow_null=True)
    uri = name_field(required=False, allow_null=True)
    type = serializers.ChoiceField(choices=OUTLET_TYPES, required=False, allow_null=True)
    asset_type = serializers.ChoiceField(choices=OUTLET_TYPES, required=False, allow_null=True)

    def validate(self, attrs: dict[str, Any]) -> OutletProfile:
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
        top_type = PAYLOAD_ASSET_TYPE.get()
        return top_type if top_type in OUTLET_TYPES else None


#: The top-level ``asset_type`` (seed format) of the success payload being validated, for its
#: profiles: the payload serializer sets it around its fields' validation (a profile cannot
#: ask its root: the fields are shared, see ``StrictSerializer``).
PAYLOAD_ASSET_TYPE: ContextVar[Any] = ContextVar("payload_asset_type", default=None)


# --- outlet events --------------------------------------------------------------------------


def event_extra_field() -> JSONObjectField:
    """An event's ``extra`` (or ``dest_asset_extra``): storable, at most
    ``ASSET_EVENT_EXTRA_MAX_BYTES`` as JSON."""
    return JSONObjectField(required=False, max_bytes_setting="ASSET_EVENT_EXTRA_MAX_BYTES")


def _partition_key_field() -> StrictStringField:
    return StrictStringField(
        max_length=PARTITION_KEY_LENGTH, not_blank=True, required=False, allow_null=True
    )


class AssetKeySerializer(LeanSerializer):
    """An asset's key, ``{"name", "uri"}``."""

    default_error_messages = {"dict_type": "Input should be a JSON object with name and uri"}

    name = StrictStringField()
    uri = StrictStringField()

    def validate(self, attrs: dict[str, Any]) -> AssetUniqueKey:
        return AssetUniqueKey(name=attrs["name"], uri=attrs["uri"])


class AssetOutletEventSerializer(LeanSerializer):
    """What the task wrote for a declared asset (``outlet_events[asset]``)."""

    dest_asset_key = AssetKeySerializer()
    extra = event_extra_field()
    partition_key = _partition_key_field()

    def validate(self, attrs: dict[str, Any]) -> AssetOutletEvent:
        key = attrs.pop("dest_asset_key")
        return AssetOutletEvent(key=key, **attrs)  # absent optional fields: the defaults


class AliasOutletEventSerializer(LeanSerializer):
    """An event emitted through an alias (``outlet_events[alias].add(...)``)."""

    source_alias_name = StrictStringField()
    dest_asset_key = AssetKeySerializer()
    dest_asset_extra = event_extra_field()
    extra = event_extra_field()
    partition_key = _partition_key_field()

    def validate(self, attrs: dict[str, Any]) -> AliasOutletEvent:
        return AliasOutletEvent(**attrs)  # absent optional fields: the defaults


class SeedOutletEventKeySerializer(LeanSerializer):
    """The key of a seed-format accessor: an asset's ``{name, uri}`` or an alias's ``{name}``."""

    name = StrictStringField()
    uri = StrictStringField(required=False, allow_null=True)


class SeedOutletEventAccessorSerializer(LeanSerializer):
    """Seed format: the accessor of one outlet, its key, extra and the alias events it holds.

    An asset's accessor is that asset's event; an alias's (its key has no uri) contributes
    only its nested alias events.
    """

    key = SeedOutletEventKeySerializer()
    extra = event_extra_field()
    partition_key = _partition_key_field()
    asset_alias_events = AliasOutletEventSerializer(many=True, required=False, allow_null=True)

    def validate(self, attrs: dict[str, Any]) -> list[OutletEvent]:
        key = attrs["key"]
        events: list[OutletEvent] = []
        if key.get("uri") is not None:
            events.append(
                AssetOutletEvent(
                    key=AssetUniqueKey(name=key["name"], uri=key["uri"]),
                    extra=attrs.get("extra", {}),
                    partition_key=attrs.get("partition_key"),
                )
            )
        events.extend(attrs.get("asset_alias_events") or ())
        return events


#: An outlet event's shape is told by a key only it has, looked for in this order. One
#: instance of each serves every request: a lean serializer's ``run_validation`` keeps no state.
OUTLET_EVENT_SHAPES: dict[str, LeanSerializer] = {
    "key": SeedOutletEventAccessorSerializer(),
    "source_alias_name": AliasOutletEventSerializer(),
    "dest_asset_key": AssetOutletEventSerializer(),
}


@extend_schema_field(
    PolymorphicProxySerializer(
        component_name="OutletEvent",
        serializers=[type(shape) for shape in OUTLET_EVENT_SHAPES.values()],
        resource_type_field_name=None,
        many=True,
    )
)
class OutletEventsField(serializers.Field[list[OutletEvent], Any, Any, Any]):
    """``outlet_events``: a list of asset events, alias events or seed accessors (flattened).

    At most ``EXECUTION_API_MAX_OUTLET_EVENTS`` events, counted before and after the seed's
    accessors are flattened.
    """

    default_error_messages = {
        "list_type": "Input should be a valid list",
        "dict_type": "Input should be a JSON object",
        "too_long": "At most {max_events} outlet events are accepted per request",
        "union_tag_not_found": (
            "Unrecognized outlet event: expected dest_asset_key, source_alias_name or key"
        ),
    }

    def to_internal_value(self, data: Any) -> list[OutletEvent]:
        if not isinstance(data, list):
            self.fail("list_type")
        max_events: int = settings.EXECUTION_API["MAX_OUTLET_EVENTS"]
        if len(data) > max_events:
            self.fail("too_long", max_events=max_events)
        events: list[OutletEvent] = []
        errors: dict[Any, Any] = {}  # by index (DRF takes any key)
        for index, item in enumerate(data):
            try:
                value = self._shape(item).run_validation(item)
            except serializers.ValidationError as exc:
                errors[index] = exc.detail
                continue
            if isinstance(value, list):
                events.extend(value)
            else:
                events.append(value)
        if errors:
            raise serializers.ValidationError(errors)
        if len(events) > max_events:
            self.fail("too_long", max_events=max_events)
        return events

    def _shape(self, item: Any) -> LeanSerializer:
        if not isinstance(item, dict):
            self.fail("dict_type")
        tag = next(filter(item.__contains__, OUTLET_EVENT_SHAPES), None)  # no frame per tag
        if tag is None:
            self.fail("union_tag_not_found")
        return OUTLET_EVENT_SHAPES[tag]

    def to_representation(self, value: Any) -> Any:  # input only
        return value
