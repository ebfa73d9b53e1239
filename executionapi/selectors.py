"""Reads the execution API needs beyond ``assets_app.selectors``.

Each returns model instances or querysets, prepared (joins, prefetches) for the output
serializer that renders them.
"""

from __future__ import annotations

import uuid
from collections.abc import Generator
from datetime import datetime
from typing import Any

from django.db.models import Prefetch, QuerySet, prefetch_related_objects

from assets_app.exceptions import AssetNotFoundError, TaskInstanceNotFoundError
from assets_app.models import (
    Asset,
    AssetActive,
    AssetAlias,
    AssetEvent,
    DagRun,
    DagRunState,
    TaskInletAssetReference,
    TaskInstance,
    TaskInstanceState,
    TaskOutletAssetReference,
    TaskReschedule,
)
from assets_app.selectors import asset_events_query


def active_asset_get(*, name: str | None = None, uri: str | None = None) -> Asset:
    """The active asset with this name (or uri), else ``AssetNotFoundError``."""
    lookup = {"name": name} if name is not None else {"uri": uri}
    active = AssetActive.objects.select_related("asset").filter(**lookup).first()
    if active is None:
        field, value = next(iter(lookup.items()))
        raise AssetNotFoundError(f"No active asset with {field} {value!r}", **lookup)
    return active.asset


def task_instance_inactive_assets(*, task_instance_id: uuid.UUID | str) -> QuerySet[Asset]:
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
    return Asset.objects.filter(pk__in=asset_ids, active__isnull=True).order_by("name", "uri")


def dag_run_consumed_events_prefetch(*, dag_run: DagRun) -> DagRun:
    """Loads the events that triggered an asset-triggered run into ``dag_run.consumed_events``.

    Oldest first, each with its asset and its source aliases (by name): what the run context
    lists as ``consumed_asset_events``. Two queries, one when the run consumed nothing.
    """
    events = (
        AssetEvent.objects.select_related("asset")
        .prefetch_related(Prefetch("source_aliases", queryset=AssetAlias.objects.order_by("name")))
        .order_by("timestamp", "id")
    )
    prefetch_related_objects([dag_run], Prefetch("consumed_events", queryset=events))
    return dag_run


def asset_events_by_asset(
    *, name: str | None, uri: str | None, **filters: Any
) -> QuerySet[AssetEvent]:
    """Events of the asset with this name and uri, or with only one of them given, of the
    *active* asset with it (none when no active asset has it).

    ``filters`` are those of :func:`assets_app.selectors.asset_events_query`.
    """
    if name is None or uri is None:
        lookup = {"name": name} if name is not None else {"uri": uri}
        key = AssetActive.objects.filter(**lookup).values_list("name", "uri").first()
        if key is None:
            return AssetEvent.objects.none()
        name, uri = key
    return asset_events_query(name=name, uri=uri, **filters)


#: Events read (and rendered) at a time by the ``/asset-events`` routes: a request's memory is
#: bounded by this many events, however many it answers with.
ASSET_EVENTS_PAGE = 500


def asset_events_pages(
    events: QuerySet[AssetEvent], *, page_size: int | None = None
) -> Generator[list[AssetEvent]]:
    """``events`` in pages of ``page_size`` (:data:`ASSET_EVENTS_PAGE`), each with its assets
    and consumed runs: one query per page for the events (a server-side cursor on
    PostgreSQL), and one for the runs of the page. The last page may be short or empty."""
    size = page_size or ASSET_EVENTS_PAGE
    page: list[AssetEvent] = []
    for event in events.iterator(chunk_size=size):
        page.append(event)
        if len(page) == size:
            yield page
            page = []
    yield page


def assets_by_alias(*, alias_name: str) -> QuerySet[Asset]:
    """The assets an alias has resolved to (Airflow's ``expand_alias_to_assets``); none for
    an unknown alias."""
    return Asset.objects.filter(aliases__name=alias_name).order_by("name", "uri").distinct()


def task_reschedule_first_start_date(*, task_instance_id: uuid.UUID) -> datetime | None:
    """When the try's first rescheduled poke started, or ``None`` before any reschedule."""
    return (
        TaskReschedule.objects.filter(ti_id=task_instance_id)
        .order_by("id")
        .values_list("start_date", flat=True)
        .first()
    )


def previous_successful_dag_run(*, task_instance_id: uuid.UUID) -> DagRun | None:
    """The latest successful run of the task instance's DAG with an earlier logical date;
    ``None`` when there is none, the TI is unknown or its run has no logical date."""
    current = (
        TaskInstance.objects.filter(pk=task_instance_id)
        .values_list("dag_id", "dag_run__logical_date")
        .first()
    )
    if current is None or current[1] is None:
        return None
    dag_id, logical_date = current
    return (
        DagRun.objects.filter(
            dag_id=dag_id, logical_date__lt=logical_date, state=DagRunState.SUCCESS
        )
        .order_by("-logical_date")
        .first()
    )


def xcom_write_refusal(
    *, task_instance_id: str, dag_id: str, run_id: str, task_id: str, map_index: int
) -> str | None:
    """Why the runner of ``task_instance_id`` may not write (or delete) this XCom, or
    ``None`` when it may: a task writes only its own XComs, and only while it runs."""
    try:
        key = uuid.UUID(task_instance_id)
    except ValueError:
        return "The token names no task instance"
    own = (
        TaskInstance.objects.filter(pk=key)
        .values_list("dag_id", "run_id", "task_id", "map_index", "state")
        .first()
    )
    if own is None:
        return "The token's task instance no longer exists"
    if own[:4] != (dag_id, run_id, task_id, map_index):
        return "A task instance may write only its own XComs"
    if own[4] != TaskInstanceState.RUNNING:
        return f"The token's task instance is not running (state {own[4]})"
    return None
