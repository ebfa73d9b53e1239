"""``/assets/…`` and ``/asset-events/…``: their query parameters and answers.

:class:`AssetEventResponseSerializer` is also the JSON of ``manage.py asset_events --json``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rest_framework import serializers

from assets_app.models import Asset, AssetEvent, DagRun
from executionapi.serializers.common import (
    BIGINT_MAX,
    AwareDateTimeField,
    QueryIntegerField,
    name_field,
)

# --- query parameters -------------------------------------------------------------------------


class AssetByNameQuerySerializer(serializers.Serializer[Any]):
    name = name_field()


class AssetByUriQuerySerializer(serializers.Serializer[Any]):
    uri = name_field()


class QueryDateTimeField(AwareDateTimeField):
    """A datetime query parameter; a ``+`` that arrived unencoded (read as a space) is kept."""

    def to_internal_value(self, value: Any) -> datetime:
        return super().to_internal_value(
            value.replace(" ", "+") if isinstance(value, str) else value
        )


class AssetEventsQuerySerializer(serializers.Serializer[Any]):
    """Filters of the ``/asset-events`` routes (``assets_app.selectors.asset_events_query``)."""

    after = QueryDateTimeField(required=False, allow_null=True, help_text="Inclusive lower bound")
    before = QueryDateTimeField(required=False, allow_null=True, help_text="Inclusive upper bound")
    ascending = serializers.BooleanField(
        required=False, default=True, help_text="Oldest first (default true)"
    )
    limit = QueryIntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        max_value=BIGINT_MAX,
        help_text="At most this many events (default: all of them)",
    )

    def filters(self) -> dict[str, Any]:
        data = self.validated_data
        return {
            "after": data.get("after"),
            "before": data.get("before"),
            "ascending": data["ascending"],
            "limit": data.get("limit"),
        }


class AssetEventsByAssetQuerySerializer(AssetEventsQuerySerializer):
    name = name_field(required=False, allow_null=True, allow_blank=True)
    uri = name_field(required=False, allow_null=True, allow_blank=True)


class AssetEventsByAliasQuerySerializer(AssetEventsQuerySerializer):
    name = name_field()


# --- answers ------------------------------------------------------------------------------------


class AssetResponseSerializer(serializers.Serializer[Asset]):
    name = serializers.CharField()
    uri = serializers.CharField()
    group = serializers.CharField()
    extra = serializers.JSONField()


class RunStartDateField(serializers.DateTimeField):
    """A run's ``start_date``; the client requires one, so a run not started yet gives
    when it was created."""

    def get_attribute(self, instance: DagRun) -> datetime:
        return instance.start_date or instance.created_at


class DagRunAssetReferenceSerializer(serializers.Serializer[DagRun]):
    """A DAG run that consumed the event (``created_dagruns``)."""

    run_id = serializers.CharField()
    dag_id = serializers.CharField()
    logical_date = serializers.DateTimeField(allow_null=True)
    start_date = RunStartDateField()
    end_date = serializers.DateTimeField(allow_null=True)
    state = serializers.CharField()
    data_interval_start = serializers.DateTimeField(allow_null=True)
    data_interval_end = serializers.DateTimeField(allow_null=True)
    partition_key = serializers.CharField(allow_null=True)


class AssetEventResponseSerializer(serializers.Serializer[AssetEvent]):
    """One event, from ``assets_app.selectors.asset_events_query`` (asset joined, runs
    prefetched); ``asset`` is null once the asset was deleted."""

    id = serializers.IntegerField()
    timestamp = serializers.DateTimeField()
    extra = serializers.JSONField()
    asset = AssetResponseSerializer(allow_null=True)
    created_dagruns = DagRunAssetReferenceSerializer(many=True)
    source_task_id = serializers.CharField(allow_null=True)
    source_dag_id = serializers.CharField(allow_null=True)
    source_run_id = serializers.CharField(allow_null=True)
    source_map_index = serializers.IntegerField(allow_null=True)
    partition_key = serializers.CharField(allow_null=True)


class AssetEventsResponseSerializer(serializers.Serializer[Any]):
    asset_events = AssetEventResponseSerializer(many=True)
