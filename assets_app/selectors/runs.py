"""Read-side queries of DAG runs and task instances."""

from __future__ import annotations

from django.db.models import QuerySet

from assets_app.exceptions import DagRunNotFoundError
from assets_app.models import (
    DagRun,
    TaskInstance,
)


def dag_run_list() -> QuerySet[DagRun]:
    """DAG runs with their note (joined), for both operator faces."""
    return DagRun.objects.select_related("dag_run_note")


def dag_run_get(*, dag_id: str, run_id: str) -> DagRun:
    """The run ``run_id`` of ``dag_id`` with its note, else ``DagRunNotFoundError``."""
    found = dag_run_list().filter(dag_id=dag_id, run_id=run_id).first()
    if found is None:
        raise DagRunNotFoundError(
            f"The DagRun with dag_id: `{dag_id}` and run_id: `{run_id}` was not found"
        )
    return found


def task_instances_of_run(*, dag_id: str, run_id: str) -> QuerySet[TaskInstance]:
    return TaskInstance.objects.select_related("dag_run").filter(dag_id=dag_id, run_id=run_id)
