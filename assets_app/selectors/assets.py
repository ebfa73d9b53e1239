"""Read-side queries of assets and events, shared by the execution API, the admin and the
commands."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db.models import Exists, OuterRef, Prefetch, Q, QuerySet, Subquery, Value
from django.db.models.functions import Upper
from django.db.models.lookups import Exact
from django.utils.text import smart_split, unescape_string_literal

from assets_app.models import (
    Asset,
    AssetActive,
    AssetAlias,
    AssetEvent,
    AssetWatcher,
    Dag,
    DagRun,
    DagScheduleAssetReference,
    TaskInletAssetReference,
    TaskOutletAssetReference,
)


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
    # one filter(): the same as chained ones, the alias being the only multi-valued join
    lookups = {
        "asset__name": name,
        "asset__uri": uri,
        "alias_links__alias__name": alias,
        "source_dag_id": dag_id,
        "timestamp__gte": after,
        "timestamp__lte": before,
    }
    events = events.filter(**{lookup: v for lookup, v in lookups.items() if v is not None})
    events = events.order_by(*(("timestamp", "id") if ascending else ("-timestamp", "-id")))
    if limit is not None:
        events = events[:limit]
    return events


# --- the admin's reads ------------------------------------------------------------------------

#: An event search matching more assets than this filters by a subquery, not an id list.
SEARCH_MAX_ASSET_IDS = 1000


def search_words(term: str) -> list[str]:
    """The words of a search term, split as the admin splits them (quotes keep a phrase)."""
    words = []
    for bit in smart_split(term):
        if bit.startswith(('"', "'")) and bit[0] == bit[-1]:
            bit = unescape_string_literal(bit)
        words.append(bit)
    return words


def asset_events_search(*, events: QuerySet[AssetEvent], term: str) -> QuerySet[AssetEvent]:
    """``events`` narrowed to a search term, written so that indexes answer it.

    Every word must match: the asset's name or uri contains it (case-insensitive), or the
    source DAG id or run id equals it (case-insensitive) — what the admin's ``search_fields``
    ``("asset__name", "asset__uri", "=source_dag_id", "=source_run_id")`` would match. A LIKE
    over the joined asset of every event would scan the whole table; instead the (small) asset
    table is searched first, one query per word, and the events are filtered by
    ``asset_id IN (<ids>)``, with the exact arms comparing ``UPPER()`` the way ``iexact`` does
    on PostgreSQL. ``idx_asset_id_timestamp`` and the ``UPPER()`` expression indexes then answer
    the OR with a bitmap scan. When more than ``SEARCH_MAX_ASSET_IDS`` assets match, their
    events are dense and the ids stay a subquery.
    """
    for word in search_words(term):
        events = events.filter(
            Q(asset_id__in=_asset_ids_containing(word))
            | Q(Exact(Upper("source_dag_id"), Upper(Value(word))))
            | Q(Exact(Upper("source_run_id"), Upper(Value(word))))
        )
    return events


def _asset_ids_containing(text: str) -> list[int] | QuerySet[Asset, Any]:
    """Ids of the assets whose name or uri contains ``text`` (case-insensitive): a list read
    now (one query), or a subquery when there are more than ``SEARCH_MAX_ASSET_IDS``."""
    assets = Asset.objects.filter(Q(name__icontains=text) | Q(uri__icontains=text))
    ids = list(assets.order_by("pk").values_list("pk", flat=True)[: SEARCH_MAX_ASSET_IDS + 1])
    if len(ids) > SEARCH_MAX_ASSET_IDS:
        return assets.values("pk")
    return ids


def asset_is_active() -> Exists:
    """Whether an asset (``OuterRef("pk")``) is active: some declared DAG uses it. Both
    operator faces read it: ``/api/v1/assets?active=`` (annotated ``is_active``) and
    ``/api/v2/assets?only_active=``."""
    return Exists(AssetActive.objects.filter(asset=OuterRef("pk")))


def asset_list_detailed() -> QuerySet[Asset]:
    """Assets with what Airflow's asset shows: the DAGs scheduled on them, the tasks producing
    and consuming them, their aliases and running watchers (prefetched) and their latest event
    (annotated ``last_event_id``/``last_event_timestamp``: the newest event, the highest id
    among ties)."""
    latest = AssetEvent.objects.filter(asset=OuterRef("pk")).order_by("-timestamp", "-id")
    return Asset.objects.annotate(
        last_event_id=Subquery(latest.values("id")[:1]),
        last_event_timestamp=Subquery(latest.values("timestamp")[:1]),
    ).prefetch_related(
        Prefetch("scheduled_dags", queryset=DagScheduleAssetReference.objects.order_by("dag_id")),
        Prefetch(
            "producing_tasks",
            queryset=TaskOutletAssetReference.objects.order_by("dag_id", "task_id"),
        ),
        Prefetch(
            "consuming_tasks",
            queryset=TaskInletAssetReference.objects.order_by("dag_id", "task_id"),
        ),
        Prefetch("aliases", queryset=AssetAlias.objects.order_by("name")),
        Prefetch(
            "watchers",
            queryset=AssetWatcher.objects.select_related("trigger").order_by("name", "trigger_id"),
        ),
    )


def asset_events_detailed() -> QuerySet[AssetEvent]:
    """Events with their asset (joined) and the runs that consumed them (prefetched)."""
    return AssetEvent.objects.select_related("asset").prefetch_related(
        Prefetch("created_dagruns", queryset=DagRun.objects.order_by("id"))
    )


def asset_producing_dag_ids(*, asset_id: int, limit: int = 2) -> list[str]:
    """The DAGs with a task that has the asset as an outlet (at most ``limit``, by id): who
    materializes it (Airflow's ``materialize_asset``)."""
    return list(
        TaskOutletAssetReference.objects.filter(asset_id=asset_id)
        .order_by("dag_id")
        .values_list("dag_id", flat=True)
        .distinct()[:limit]
    )


def asset_declared_in(*, asset_id: int) -> list[str]:
    """The files (DAG files or manifests) whose DAGs, still declared, schedule on the asset or
    name it as a task's inlet or outlet: they own it, and their next load writes it again.
    One query."""
    dag_ids = (
        DagScheduleAssetReference.objects.filter(asset_id=asset_id)
        .values("dag_id")
        .union(
            TaskOutletAssetReference.objects.filter(asset_id=asset_id).values("dag_id"),
            TaskInletAssetReference.objects.filter(asset_id=asset_id).values("dag_id"),
        )
    )
    return sorted(
        set(
            Dag.objects.filter(dag_id__in=dag_ids, is_stale=False)
            .exclude(fileloc="")
            .values_list("fileloc", flat=True)
        )
    )
