"""Read-side queries shared by the execution API, the admin and the commands."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.db.models import Prefetch, QuerySet

from assets_app.models import AssetEvent, DagRun


def _iso(value: datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value is not None else None


def asset_events_query(
    *,
    name: str | None = None,
    uri: str | None = None,
    alias: str | None = None,
    dag_id: str | None = None,
    after: datetime | None = None,
    before: datetime | None = None,
    ascending: bool = True,
    limit: int | None = None,
) -> QuerySet[AssetEvent]:
    """Events filtered like Airflow's ``/asset-events`` routes; ``after``/``before`` inclusive.

    The result is ready for :func:`asset_event_items` (asset joined, dag runs prefetched).
    """
    events = AssetEvent.objects.select_related("asset").prefetch_related(
        Prefetch("created_dagruns", queryset=DagRun.objects.order_by("id"))
    )
    if name is not None:
        events = events.filter(asset__name=name)
    if uri is not None:
        events = events.filter(asset__uri=uri)
    if alias is not None:
        events = events.filter(alias_links__alias__name=alias)
    if dag_id is not None:
        events = events.filter(source_dag_id=dag_id)
    if after is not None:
        events = events.filter(timestamp__gte=after)
    if before is not None:
        events = events.filter(timestamp__lte=before)
    events = events.order_by(*(("timestamp", "id") if ascending else ("-timestamp", "-id")))
    if limit is not None:
        events = events[:limit]
    return events


def dag_run_reference(run: DagRun) -> dict[str, Any]:
    """A DAG run as listed in an event's ``created_dagruns``.

    The real task SDK client requires a non-null ``start_date`` here; a run that has not
    started yet reports when it was created.
    """
    return {
        "run_id": run.run_id,
        "dag_id": run.dag_id,
        "logical_date": _iso(run.logical_date),
        "start_date": _iso(run.start_date or run.created_at),
        "end_date": _iso(run.end_date),
        "state": run.state,
        "data_interval_start": _iso(run.data_interval_start),
        "data_interval_end": _iso(run.data_interval_end),
        "partition_key": run.partition_key,
    }


def asset_event_item(event: AssetEvent) -> dict[str, Any]:
    """One event in the SPEC's asset-event item shape (JSON-ready)."""
    asset = event.asset
    return {
        "id": event.pk,
        "timestamp": _iso(event.timestamp),
        "extra": event.extra,
        "asset": (
            {"name": asset.name, "uri": asset.uri, "group": asset.group, "extra": asset.extra}
            if asset is not None
            else None
        ),
        "created_dagruns": [dag_run_reference(run) for run in event.created_dagruns.all()],
        "source_task_id": event.source_task_id,
        "source_dag_id": event.source_dag_id,
        "source_run_id": event.source_run_id,
        "source_map_index": event.source_map_index,
        "partition_key": event.partition_key,
    }


def asset_event_items(events: Iterable[AssetEvent]) -> list[dict[str, Any]]:
    return [asset_event_item(event) for event in events]
