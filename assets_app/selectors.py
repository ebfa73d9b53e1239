"""Read-side queries shared by the execution API, the admin and the commands."""

from __future__ import annotations

from datetime import datetime

from django.db.models import Prefetch, QuerySet

from assets_app.models import AssetEvent, DagRun


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

    Each event comes with its asset (joined; ``None`` once deleted) and the DAG runs that
    consumed it (``created_dagruns``, prefetched by id): the execution API's event item.
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
