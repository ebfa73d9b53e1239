"""Reads of ``/api/v2/``, over the selectors both operator faces share
(``assets_app.selectors``): the rows a route shows, with what ``publicapi.render`` needs
joined or prefetched. A route's one row is ``None`` when there is none, and the view words the
404 as Airflow does."""

from __future__ import annotations

import uuid
from collections.abc import Collection

from django.db import DatabaseError, connection
from django.db.models import Exists, OuterRef, QuerySet

from assets_app.models import (
    Asset,
    AssetAlias,
    AssetEvent,
    Dag,
    DagImportError,
    DagRun,
    DagRunState,
    DagTask,
    TaskInstance,
    XCom,
)
from assets_app.selectors.assets import asset_events_detailed, asset_list_detailed
from assets_app.selectors.dags import dag_list, import_error_list
from assets_app.selectors.runs import dag_run_list, task_instances_of_run

# --- assets -----------------------------------------------------------------------------------


def asset_detailed_get(*, asset_id: int) -> Asset | None:
    """The asset as Airflow shows it (``asset_list_detailed``)."""
    return asset_list_detailed().filter(pk=asset_id).first()


def asset_get(*, asset_id: int) -> Asset | None:
    """The asset's row alone (its name and uri)."""
    return Asset.objects.filter(pk=asset_id).first()


def alias_list() -> QuerySet[AssetAlias]:
    return AssetAlias.objects.all()


def alias_get(*, alias_id: int) -> AssetAlias | None:
    return AssetAlias.objects.filter(pk=alias_id).first()


def asset_event_detailed_get(*, event_id: int) -> AssetEvent:
    """An event (it exists: one just created) as Airflow shows it."""
    return asset_events_detailed().get(pk=event_id)


# --- DAGs and their runs ----------------------------------------------------------------------


def dags() -> QuerySet[Dag]:
    """DAGs, each with ``has_import_error``: its file fails to load now (its DAG keeps the
    last version that loaded), Airflow's ``has_import_errors``."""
    failing = DagImportError.objects.filter(filename=OuterRef("fileloc"))
    return dag_list().annotate(has_import_error=Exists(failing))


def dag_get(*, dag_id: str) -> Dag | None:
    return dags().filter(dag_id=dag_id).first()


def dag_exists(*, dag_id: str) -> bool:
    return Dag.objects.filter(dag_id=dag_id).exists()


def dags_by_id(*, dag_ids: Collection[str]) -> list[Dag]:
    """The DAGs of ``dag_ids`` (those that exist), by id."""
    return list(dags().filter(dag_id__in=dag_ids).order_by("dag_id"))


def dag_runs_of(*, dag_id: str | None) -> QuerySet[DagRun]:
    """The runs of ``dag_id``, or of every DAG (``None``)."""
    rows = dag_run_list()
    return rows if dag_id is None else rows.filter(dag_id=dag_id)


def task_instances_in_order(*, dag_id: str, run_id: str) -> QuerySet[TaskInstance]:
    """The run's task instances by task id, then map index."""
    return task_instances_of_run(dag_id=dag_id, run_id=run_id).order_by("task_id", "map_index")


def task_instance_get(
    *, dag_id: str, run_id: str, task_id: str, map_index: int = -1
) -> TaskInstance | None:
    """The run's task instance of ``task_id`` (unmapped, or the mapped one's ``map_index``)."""
    return (
        task_instances_of_run(dag_id=dag_id, run_id=run_id)
        .filter(task_id=task_id, map_index=map_index)
        .first()
    )


def task_instances_of_task(
    *, dag_id: str, run_id: str, task_id: str, map_index: int | None
) -> QuerySet[TaskInstance]:
    """The run's task instances of ``task_id``: one map index, or all of them (``None``)."""
    rows = task_instances_in_order(dag_id=dag_id, run_id=run_id).filter(task_id=task_id)
    return rows if map_index is None else rows.filter(map_index=map_index)


def task_is_mapped(*, dag_id: str, task_id: str) -> bool | None:
    """Whether the DAG's task is mapped (``None``: the DAG declares no such task)."""
    mapped = DagTask.objects.filter(dag_id=dag_id, task_id=task_id).values_list("mapped", flat=True)
    return None if not mapped else mapped[0] is not None


def task_instances_by_id(
    *, dag_id: str, run_id: str, ids: Collection[uuid.UUID]
) -> list[TaskInstance]:
    """The run's task instances of ``ids``."""
    return list(task_instances_of_run(dag_id=dag_id, run_id=run_id).filter(pk__in=ids))


def xcom_get(*, dag_id: str, run_id: str, task_id: str, key: str, map_index: int) -> XCom | None:
    """The XCom with its run (joined)."""
    return (
        XCom.objects.select_related("dag_run")
        .filter(dag_id=dag_id, run_id=run_id, task_id=task_id, key=key, map_index=map_index)
        .first()
    )


def xcom_list(*, dag_id: str, run_id: str, task_id: str) -> QuerySet[XCom]:
    """XComs with their runs (joined), of one DAG, run and task, each ``~`` for all."""
    rows = XCom.objects.select_related("dag_run")
    for field, value in (("dag_id", dag_id), ("run_id", run_id), ("task_id", task_id)):
        if value != "~":
            rows = rows.filter(**{field: value})
    return rows


def dag_active_run_count(*, dag_id: str) -> int:
    """The DAG's running runs (Airflow's ``active_runs_count``)."""
    return DagRun.objects.filter(dag_id=dag_id, state=DagRunState.RUNNING).count()


def dag_tasks(*, dag_id: str) -> tuple[list[DagTask], dict[str, list[str]]]:
    """The DAG's tasks by id, and each task's direct downstream task ids (one query)."""
    tasks = list(DagTask.objects.filter(dag_id=dag_id).order_by("task_id"))
    downstream: dict[str, list[str]] = {t.task_id: [] for t in tasks}
    for t in tasks:
        for up in t.upstream:
            if up in downstream:
                downstream[up].append(t.task_id)
    return tasks, {task_id: sorted(ids) for task_id, ids in downstream.items()}


def import_error_get(*, import_error_id: int) -> DagImportError | None:
    return import_error_list().filter(pk=import_error_id).first()


# --- monitoring -------------------------------------------------------------------------------


def metadatabase_is_healthy() -> bool:
    """Whether the database answers a query."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except DatabaseError:
        return False
    return True
