"""Read-side queries of DAG runs and task instances."""

from __future__ import annotations

from django.db.models import Count, QuerySet

from assets_app.exceptions import DagRunNotFoundError
from assets_app.models import (
    TOKEN_REFRESH_TI_STATES,
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


def task_instance_token_renewable(task_instance_id: str) -> bool:
    """Whether the token of ``task_instance_id`` may be refreshed: the task instance is still
    this try (a retry moves on under a new id) and its runner may still call the API for it
    (``TOKEN_REFRESH_TI_STATES``). 1 query."""
    return TaskInstance.objects.filter(
        pk=task_instance_id, state__in=TOKEN_REFRESH_TI_STATES
    ).exists()


def dag_run_state_counts(*, dag_ids: list[str] | None = None) -> dict[str, dict[str, int]]:
    """Each DAG's number of runs in each state (Airflow's ``dagStats``), the DAGs that have
    runs, by id; only ``dag_ids`` when given. One ``GROUP BY``."""
    rows = DagRun.objects.order_by()
    if dag_ids:
        rows = rows.filter(dag_id__in=dag_ids)
    counts: dict[str, dict[str, int]] = {}
    for dag_id, state, count in (
        rows.values_list("dag_id", "state").annotate(count=Count("pk")).order_by("dag_id")
    ):
        counts.setdefault(dag_id, {})[state] = count
    return counts
