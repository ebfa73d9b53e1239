"""What a task instance's scheduling reads of its declared task: its retries, its direct
upstreams, its trigger rule, its pool and priority (:class:`TaskPlan`), and the task instances
a new run gets (:func:`dags_task_ids`). Read by the creating of runs
(``admit.dag_runs_insert``) and by the deciding of waiting task instances
(``advance.task_instances_advance``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from assets_app.models import (
    DEFAULT_POOL,
    DagTask,
    TaskInletAssetReference,
    TaskOutletAssetReference,
)
from assets_app.services.sql import Dialect, column_values, of, statements_cursor, table
from assets_app.trigger_rules import DEFAULT_TRIGGER_RULE
from assets_app.weight_rules import WeightedTask, priority_weights


@dataclass(frozen=True)
class TaskPlan:
    """What a task instance's scheduling reads of its declared task."""

    retries: int = 0
    upstream: tuple[str, ...] = ()
    trigger_rule: str = DEFAULT_TRIGGER_RULE.value
    pool: str = DEFAULT_POOL
    pool_slots: int = 1
    #: the task instance's priority: the task's weight rule applied (``weight_rules``)
    priority_weight: int = 1
    #: waits for the same task in the previous run (``past``)
    depends_on_past: bool = False
    wait_for_downstream: bool = False
    ignore_first_depends_on_past: bool = True
    #: how it expands into map indexes (``assets_app.mapping``); ``None``: not mapped
    mapped: dict[str, Any] | None = None

    @property
    def map_group(self) -> str | None:
        """The closest mapped task group it is in: its tasks depend on each other per map
        index."""
        return self.mapped["group"] if self.mapped else None


#: The plan of a task no manifest declares: no retries, no upstreams, the default rule.
NO_PLAN = TaskPlan()


def dags_task_plans(dag_ids: Collection[str]) -> dict[tuple[str, str], TaskPlan]:
    """``(dag_id, task_id)`` → its declared :class:`TaskPlan` (1 statement, none without
    DAGs; prepared: the scheduler reads it per batch); a task no manifest declares has none
    (the defaults: no retries, no upstreams, ``default_pool``). Priorities are computed over
    each DAG's tasks (``weight_rules.priority_weights``)."""
    if not dag_ids:
        return {}
    sql = Dialect.current()
    t = of("t", DagTask)
    among, ids = sql.among(t("dag"), dag_ids, type="text")
    with statements_cursor() as cursor:
        sql.execute(
            cursor,
            f"""
            SELECT {t("dag")}, {t("task_id")}, {t("retries")}, {t("upstream")},
                {t("trigger_rule")}, {t("pool")}, {t("pool_slots")}, {t("priority_weight")},
                {t("weight_rule")}, {t("depends_on_past")}, {t("wait_for_downstream")},
                {t("ignore_first_depends_on_past")}, {t("mapped")}
            FROM {table(DagTask)} t WHERE {among}
            """,  # noqa: S608 - names from the models, values bound as parameters
            [ids],
        )
        rows = cursor.fetchall()
    # JSON converted as the ORM reads the column
    upstreams = column_values(DagTask, "upstream", [row[3] for row in rows])
    mapped = column_values(DagTask, "mapped", [row[12] for row in rows])
    graphs: dict[str, dict[str, WeightedTask]] = {}
    for row, upstream in zip(rows, upstreams, strict=True):
        graphs.setdefault(row[0], {})[row[1]] = WeightedTask(
            upstream=tuple(upstream or ()), priority_weight=row[7], weight_rule=row[8]
        )
    weights = {dag_id: priority_weights(graph) for dag_id, graph in graphs.items()}
    return {
        (dag_id, task_id): TaskPlan(
            retries=retries,
            upstream=graphs[dag_id][task_id].upstream,
            trigger_rule=trigger_rule,
            pool=pool,
            pool_slots=pool_slots,
            priority_weight=weights[dag_id][task_id],
            depends_on_past=bool(past),
            wait_for_downstream=bool(downstream),
            ignore_first_depends_on_past=bool(ignore_first),
            mapped=mapping,
        )
        for (
            dag_id,
            task_id,
            retries,
            _,
            trigger_rule,
            pool,
            pool_slots,
            _,
            _,
            past,
            downstream,
            ignore_first,
            _,
        ), mapping in zip(rows, mapped, strict=True)
    }


def dags_task_ids(declared: Mapping[str, list[Any]]) -> dict[str, list[str]]:
    """The task instances a new run of each DAG gets: its declared tasks (``declared``: its
    ``Dag.task_ids``), or, without a declared list, the tasks its asset references name (0
    queries if every DAG declares its tasks, else 2)."""
    task_ids = {
        dag_id: list(dict.fromkeys(str(task_id) for task_id in tasks))
        for dag_id, tasks in declared.items()
        if tasks
    }
    undeclared = [dag_id for dag_id, tasks in declared.items() if not tasks]
    if undeclared:
        found: dict[str, set[str]] = {dag_id: set() for dag_id in undeclared}
        for model in (TaskOutletAssetReference, TaskInletAssetReference):
            for dag_id, task_id in model.objects.filter(dag_id__in=undeclared).values_list(
                "dag_id", "task_id"
            ):
                found[dag_id].add(task_id)
        task_ids.update((dag_id, sorted(tasks)) for dag_id, tasks in found.items())
    return task_ids
