"""Read-side querysets of the operator API, each shaped for its output serializer: every
related object a page shows is joined or prefetched, so a page costs the same number of
queries whatever its size (pinned in ``tests/operatorapi/test_queries.py``)."""

from __future__ import annotations

from django.db.models import Prefetch, QuerySet

from assets_app.models import (
    Asset,
    AssetAlias,
    AssetDagRunQueue,
    AssetEvent,
    DagRun,
)
from assets_app.selectors.assets import asset_is_active


def asset_list() -> QuerySet[Asset]:
    """Assets with ``is_active`` and their aliases (one prefetch)."""
    return Asset.objects.annotate(is_active=asset_is_active()).prefetch_related(
        Prefetch("aliases", queryset=AssetAlias.objects.order_by("name"))
    )


def asset_alias_list() -> QuerySet[AssetAlias]:
    """Aliases with the assets they resolved to (one prefetch)."""
    return AssetAlias.objects.prefetch_related(
        Prefetch("assets", queryset=Asset.objects.order_by("name", "uri"))
    )


def asset_event_list() -> QuerySet[AssetEvent]:
    """Events with their asset (joined), source aliases and consuming runs (two prefetches)."""
    return AssetEvent.objects.select_related("asset").prefetch_related(
        Prefetch("source_aliases", queryset=AssetAlias.objects.order_by("name")),
        Prefetch("created_dagruns", queryset=DagRun.objects.order_by("id")),
    )


def queue_list() -> QuerySet[AssetDagRunQueue]:
    """``asset_dag_run_queue`` rows with their asset (joined)."""
    return AssetDagRunQueue.objects.select_related("asset")
