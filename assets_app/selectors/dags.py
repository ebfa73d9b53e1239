"""Read-side queries of DAGs, their queue of waiting asset events and their import errors."""

from __future__ import annotations

from datetime import datetime

from django.db.models import QuerySet

from assets_app.models import (
    AssetDagRunQueue,
    Dag,
    DagCode,
    DagImportError,
)
from assets_app.timetables import timetable_from_json


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


def dag_tag_names(*, with_stale: bool = True) -> set[str]:
    """Every tag some DAG has (not those only stale DAGs have, when not ``with_stale``: as
    Airflow's tag list). The DAG table is small: its tags are read whole, on both databases
    alike."""
    rows = Dag.objects.all() if with_stale else Dag.objects.filter(is_stale=False)
    return {tag for tags in rows.values_list("tags", flat=True) for tag in tags or ()}


def import_error_list() -> QuerySet[DagImportError]:
    """DAG files that failed to load, for both operator faces (``/api/v1/import-errors`` and
    ``/api/v2/importErrors``)."""
    return DagImportError.objects.all()


def dag_schedule_description(dag: Dag) -> str:
    """The DAG's schedule in words, as Airflow's ``timetable_description``: ``Triggered by
    assets``, the time schedule's words (``At 00:00``), both (``Triggered by assets or At
    00:00``), or ``Never, external triggers only``."""
    time = ""
    if dag.timetable:
        try:
            time = timetable_from_json(dag.timetable).description
        except ValueError:
            time = dag.timetable_summary
    if dag.asset_expression is not None:
        return f"Triggered by assets or {time}" if time else "Triggered by assets"
    return time or "Never, external triggers only"


def dag_code_get(dag: Dag) -> DagCode | None:
    """The text of the file ``dag`` was last loaded from, if kept (one query)."""
    if not dag.fileloc:
        return None
    return DagCode.objects.filter(fileloc=dag.fileloc).first()
