"""Reads the execution API needs beyond ``assets_app.selectors``."""

from __future__ import annotations

import uuid
from typing import Any

from django.db.models import Prefetch

from assets_app.exceptions import AssetNotFoundError, TaskInstanceNotFoundError
from assets_app.models import (
    Asset,
    AssetActive,
    AssetAlias,
    AssetEvent,
    DagRun,
    DagRunAssetEvent,
    TaskInletAssetReference,
    TaskInstance,
    TaskOutletAssetReference,
)
from assets_app.outlets import OutletType
from assets_app.selectors import asset_event_items, asset_events_query


def active_asset_get(*, name: str | None = None, uri: str | None = None) -> Asset:
    """The active asset with this name (or uri), else ``AssetNotFoundError``."""
    lookup = {"name": name} if name is not None else {"uri": uri}
    active = AssetActive.objects.select_related("asset").filter(**lookup).first()
    if active is None:
        field, value = next(iter(lookup.items()))
        raise AssetNotFoundError(f"No active asset with {field} {value!r}", **lookup)
    return active.asset


def task_instance_inactive_assets(*, task_instance_id: uuid.UUID | str) -> list[dict[str, Any]]:
    """Declared ``Asset`` inlets/outlets of the TI's task whose asset is not active.

    Raises ``TaskInstanceNotFoundError`` for an unknown task instance.
    """
    references = (
        TaskInstance.objects.filter(pk=task_instance_id).values("dag_id", "task_id").first()
    )
    if references is None:
        raise TaskInstanceNotFoundError(task_instance_id=str(task_instance_id))
    asset_ids = (
        TaskOutletAssetReference.objects.filter(**references)
        .values("asset_id")
        .union(TaskInletAssetReference.objects.filter(**references).values("asset_id"))
    )
    assets = Asset.objects.filter(pk__in=asset_ids, active__isnull=True).order_by("name", "uri")
    return [{"name": a.name, "uri": a.uri, "type": OutletType.ASSET.value} for a in assets]


def consumed_asset_events(*, dag_run: DagRun) -> list[dict[str, Any]]:
    """The events that triggered an asset-triggered run (``dagrun_asset_event``).

    Shaped like the real task SDK's ``AssetEventDagRunReference`` (which forbids unknown
    keys): asset {name, uri, extra}, source fields, ``source_aliases``, timestamp, partition_key.
    """
    links = (
        DagRunAssetEvent.objects.filter(dag_run=dag_run)
        .select_related("event__asset")
        .prefetch_related(
            Prefetch("event__source_aliases", queryset=AssetAlias.objects.order_by("name"))
        )
        .order_by("event__timestamp", "event_id")
    )
    items = []
    for link in links:
        event: AssetEvent = link.event
        asset = event.asset
        items.append(
            {
                "asset": {
                    "name": asset.name if asset else "",
                    "uri": asset.uri if asset else "",
                    "extra": asset.extra if asset else {},
                },
                "extra": event.extra,
                "source_task_id": event.source_task_id,
                "source_dag_id": event.source_dag_id,
                "source_run_id": event.source_run_id,
                "source_map_index": event.source_map_index,
                "source_aliases": [{"name": alias.name} for alias in event.source_aliases.all()],
                "timestamp": event.timestamp,
                "partition_key": event.partition_key,
            }
        )
    return items


def run_context(*, task_instance: TaskInstance, should_retry: bool) -> dict[str, Any]:
    """The ``/run`` response: the DAG run (twelve keys) and the TI's retry bookkeeping."""
    dag_run = task_instance.dag_run
    return {
        "dag_run": {
            "dag_id": dag_run.dag_id,
            "run_id": dag_run.run_id,
            "logical_date": dag_run.logical_date,
            "data_interval_start": dag_run.data_interval_start,
            "data_interval_end": dag_run.data_interval_end,
            "run_after": dag_run.run_after,
            "start_date": dag_run.start_date,
            "end_date": dag_run.end_date,
            "run_type": dag_run.run_type,
            "state": dag_run.state,
            "consumed_asset_events": consumed_asset_events(dag_run=dag_run),
            "partition_key": dag_run.partition_key,
        },
        "max_tries": task_instance.max_tries,
        "task_reschedule_count": task_instance.task_reschedule_count,
        "variables": [],
        "connections": [],
        "upstream_map_indexes": None,
        "next_method": task_instance.next_method,
        "next_kwargs": task_instance.next_kwargs,
        "should_retry": should_retry,
    }


def asset_event_list(**filters: Any) -> list[dict[str, Any]]:
    """Events in the ``/asset-events`` item shape."""
    return asset_event_items(asset_events_query(**filters))


def active_asset_key(*, name: str | None, uri: str | None) -> tuple[str, str] | None:
    """(name, uri) of the active asset with this name or uri (one of them given), if any."""
    lookup = {"name": name} if name else {"uri": uri}
    return AssetActive.objects.filter(**lookup).values_list("name", "uri").first()
