"""Read-side queries of DAGs, their queue of waiting asset events and their import errors."""

from __future__ import annotations

from datetime import datetime

from django.db.models import QuerySet

from assets_app.models import (
    AssetDagRunQueue,
    Dag,
    DagImportError,
)


def dag_list() -> QuerySet[Dag]:
    """DAGs, for both operator faces (``/api/v1/dags`` and ``/api/v2/dags``)."""
    return Dag.objects.all()


def queued_events_query(
    *, dag_id: str | None = None, asset_id: int | None = None, before: datetime | None = None
) -> QuerySet[AssetDagRunQueue]:
    """``asset_dag_run_queue`` rows of a DAG, an asset or both, created before ``before``."""
    rows = AssetDagRunQueue.objects.all()
    if dag_id is not None:
        rows = rows.filter(target_dag_id=dag_id)
    if asset_id is not None:
        rows = rows.filter(asset_id=asset_id)
    if before is not None:
        rows = rows.filter(created_at__lt=before)
    return rows.order_by("created_at", "id")


def import_error_list() -> QuerySet[DagImportError]:
    """DAG files that failed to load, for both operator faces (``/api/v1/import-errors`` and
    ``/api/v2/importErrors``)."""
    return DagImportError.objects.all()
