"""Reads the execution API needs beyond ``assets_app.selectors``.

Each returns model instances or querysets, prepared (joins, prefetches) for the output
serializer that renders them.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Generator
from datetime import datetime
from typing import Any

from django.db.models import F, Prefetch, Q, QuerySet, Subquery, prefetch_related_objects
from django.db.models.functions import Coalesce

from assets_app.exceptions import AssetNotFoundError, TaskInstanceNotFoundError
from assets_app.models import (
    FINISHED_TI_STATES,
    Asset,
    AssetActive,
    AssetAlias,
    AssetEvent,
    Dag,
    DagRun,
    DagRunState,
    TaskInletAssetReference,
    TaskInstance,
    TaskInstanceState,
    TaskOutletAssetReference,
    TaskReschedule,
    XCom,
)
from assets_app.selectors.assets import asset_events_query


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


# --- XCom reads: one value, an offset, a slice (Airflow's ``XComModel.get_many``) ------------


def xcoms_of_task(
    *, dag_id: str, run_id: str, task_id: str, key: str, include_prior_dates: bool = False
) -> QuerySet[XCom]:
    """The XComs a task pushed under ``key`` in one run; with ``include_prior_dates`` also
    those of the DAG's runs dated (logical date, else run after) no later than that run,
    newest run first, as Airflow's ``XComModel.get_many``."""
    xcoms = XCom.objects.filter(dag_id=dag_id, task_id=task_id, key=key)
    if include_prior_dates:
        run_date = (
            DagRun.objects.filter(dag_id=dag_id, run_id=run_id)
            .annotate(date=Coalesce("logical_date", "run_after"))
            .values("date")[:1]
        )
        return (
            xcoms.alias(run_date=Coalesce("dag_run__logical_date", "dag_run__run_after"))
            .filter(run_date__lte=Subquery(run_date))
            .order_by(F("dag_run__logical_date").desc(nulls_first=True), "-timestamp")
        )
    return xcoms.filter(run_id=run_id)  # one value per map index: no order needed, no join


def xcom_value_at_offset(xcoms: QuerySet[XCom], *, offset: int) -> XCom | None:
    """The XCom at ``offset`` in map-index order (``-1`` the last, as a Python index);
    ``None`` past either end."""
    if offset >= 0:
        return xcoms.order_by("map_index").only("value")[offset : offset + 1].first()
    return xcoms.order_by("-map_index").only("value")[-1 - offset : -offset].first()


def xcom_values_slice(
    xcoms: QuerySet[XCom], *, start: int | None, stop: int | None, step: int | None
) -> list[Any]:
    """The values of ``xcoms`` in map-index order, sliced as Python slices a list
    (``values[start:stop:step]``; a step of 0 or none is 1, as Airflow's route): one count
    and one read of the rows between the first and the last position taken."""
    positions = range(*slice(start, stop, step or 1).indices(xcoms.count()))
    if not positions:
        return []
    low, high = min(positions), max(positions)
    window = list(xcoms.order_by("map_index").values_list("value", flat=True)[low : high + 1])
    if positions.step < 0:
        window.reverse()
    return window[:: abs(positions.step)]


# --- DAG runs and task instances of a DAG, as a task asks for them ----------------------------


def dag_run_detail(*, dag_id: str, run_id: str) -> DagRun | None:
    """The run, with the events it consumed (for ``DagRunDetailSerializer``)."""
    dag_run = DagRun.objects.filter(dag_id=dag_id, run_id=run_id).first()
    return None if dag_run is None else dag_run_consumed_events_prefetch(dag_run=dag_run)


def dag_run_previous(
    *, dag_id: str, logical_date: datetime, state: str | None = None
) -> DagRun | None:
    """The DAG's latest run with a logical date before ``logical_date`` (in ``state``)."""
    runs = DagRun.objects.filter(dag_id=dag_id, logical_date__lt=logical_date)
    if state is not None:
        runs = runs.filter(state=state)
    dag_run = runs.order_by("-logical_date").first()
    return None if dag_run is None else dag_run_consumed_events_prefetch(dag_run=dag_run)


def dag_runs_count(
    *,
    dag_id: str,
    logical_dates: Collection[datetime] = (),
    run_ids: Collection[str] = (),
    states: Collection[str] = (),
) -> int:
    """How many runs of the DAG match every filter given (Airflow's ``get_dr_count``)."""
    runs = DagRun.objects.filter(dag_id=dag_id)
    if logical_dates:
        runs = runs.filter(logical_date__in=logical_dates)
    if run_ids:
        runs = runs.filter(run_id__in=run_ids)
    if states:
        runs = runs.filter(state__in=states)
    return runs.count()


def dag_task_group_task_ids(*, dag_id: str, task_group_id: str) -> list[str] | None:
    """The declared tasks of a task group: those whose id starts ``<group id>.`` (Airflow
    prefixes a group's task ids with the group's id unless told not to); ``None`` when the
    DAG has no such task (no such group, as far as the registry knows)."""
    declared = Dag.objects.filter(dag_id=dag_id).values_list("task_ids", flat=True).first()
    prefix = f"{task_group_id}."
    members = [task_id for task_id in declared or () if str(task_id).startswith(prefix)]
    return members or None


def task_instances_of_dag(
    *,
    dag_id: str,
    map_index: int | None = None,
    task_ids: Collection[str] = (),
    logical_dates: Collection[datetime] = (),
    run_ids: Collection[str] = (),
) -> QuerySet[TaskInstance]:
    """The DAG's task instances matching every filter given (Airflow's ``get_ti_count`` and
    ``get_task_states`` before their ``task_group_id`` and ``states``)."""
    tis = TaskInstance.objects.filter(dag_id=dag_id)
    if task_ids:
        tis = tis.filter(task_id__in=task_ids)
    if map_index is not None:
        tis = tis.filter(map_index=map_index)
    if logical_dates:
        tis = tis.filter(dag_run__logical_date__in=logical_dates)
    if run_ids:
        tis = tis.filter(run_id__in=run_ids)
    return tis


def task_instances_with_states(
    tis: QuerySet[TaskInstance], *, states: Collection[str]
) -> QuerySet[TaskInstance]:
    """``tis`` in one of ``states``, where ``"null"`` stands for no state (Airflow's)."""
    if not states:
        return tis
    named = [state for state in states if state != "null"]
    in_named = Q(state__in=named)
    return tis.filter(in_named | Q(state__isnull=True) if "null" in states else in_named)


def task_instance_previous(
    *,
    dag_id: str,
    task_id: str,
    map_index: int = -1,
    logical_date: datetime | None = None,
    state: str | None = None,
) -> TaskInstance | None:
    """The task's instance in the DAG's latest run (by logical date) before
    ``logical_date`` (when given), in ``state`` (when given), with its run."""
    tis = TaskInstance.objects.select_related("dag_run").filter(
        dag_id=dag_id, task_id=task_id, map_index=map_index
    )
    if logical_date is not None:
        tis = tis.filter(dag_run__logical_date__lt=logical_date)
    if state is not None:
        tis = tis.filter(state=state)
    return tis.order_by(F("dag_run__logical_date").desc(nulls_first=True)).first()


def task_instance_breadcrumbs(*, dag_id: str, run_id: str) -> QuerySet[TaskInstance]:
    """The run's finished task instances (Airflow's ``TerminalTIState``: the finished states),
    by task and index."""
    return (
        TaskInstance.objects.filter(dag_id=dag_id, run_id=run_id, state__in=FINISHED_TI_STATES)
        .order_by("task_id", "map_index")
        .only("task_id", "map_index", "state", "duration")
    )


def run_triggering_user_name(*, task_instance_id: uuid.UUID | str) -> str | None:
    """Who triggered the run of ``task_instance_id`` (a run its TriggerDagRunOperator
    triggers inherits it, as in Airflow, so a chain keeps the person who started it)."""
    found: str | None = (
        TaskInstance.objects.filter(pk=task_instance_id)
        .values_list("dag_run__triggering_user_name", flat=True)
        .first()
    )
    return found
