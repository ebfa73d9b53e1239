"""Expanding mapped tasks (Airflow 3.3's ``TaskMap.expand_mapped_task``): a mapped task's
run starts with one unexpanded task instance (``map_index = -1``); once its trigger rule holds
(``advance``), it becomes as many task instances as its expansion's length
(``assets_app.mapping``), map indexes ``0 … n-1`` — or it is skipped when it maps over
nothing, upstream-failed when a value it maps over was never pushed, and failed when it maps
over more than ``MAX_MAP_LENGTH`` values.

What an upstream pushed is read from ``task_map`` (an unmapped upstream's ``mapped_length``,
written with its return value, ``state.xcoms.xcom_set``) or, for a mapped upstream (Airflow's
"second order" mapping), from how many of its map indexes pushed a return value once all of
them finished. Two statements read both for every run a pass expands in; one expansion
writes three (however wide), in one transaction: a process killed in the middle leaves the
task unexpanded for the next pass, never half expanded, and two processes expanding the same
task leave one set of map indexes (the ``UPDATE … WHERE map_index = -1`` lets one win).
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.models import Count

from assets_app.mapping import length_evaluate, max_map_length
from assets_app.models import (
    FINISHED_TI_STATES,
    TaskInstance,
    TaskInstanceState,
    TaskMap,
    XCom,
)
from assets_app.services.sql import model_rows_insert

#: Airflow's key of a task's return value.
RETURN_KEY = "return_value"


class _Wait:
    def __repr__(self) -> str:
        return "WAIT_FOR_UPSTREAMS"


#: An expansion's length is not known yet: a mapped upstream still has map indexes running.
WAIT_FOR_UPSTREAMS: Final = _Wait()

#: What a new map index copies of its task's unexpanded task instance.
_COPIED = (
    "dag_run",
    "dag_id",
    "run_id",
    "task_id",
    "try_number",
    "max_tries",
    "has_downstream",
    "pool",
    "pool_slots",
    "priority_weight",
)

_FINISHED = frozenset(state.value for state in FINISHED_TI_STATES)


class _Instance(Protocol):
    """What the expansion reads of a run's task instance (``advance``'s)."""

    pk: uuid.UUID
    state: str | None
    map_index: int

    @property
    def plan(self) -> Any: ...


@dataclass
class Expansion:
    """One mapped task expanded in memory: its unexpanded instance ``pk`` becomes map index 0,
    ``new_pks`` the others, in order."""

    dag_run_id: int
    pk: uuid.UUID
    new_pks: list[uuid.UUID]
    instances: list[Any] = field(default_factory=list)


@dataclass
class RunMapLengths:
    """What the upstreams of one run pushed for mapped downstreams."""

    #: an unmapped task's ``mapped_length`` (``task_map``)
    task_maps: Mapping[str, int] = field(default_factory=dict)
    #: how many map indexes of a mapped task pushed a return value
    returns: Mapping[str, int] = field(default_factory=dict)

    def expansion_length(
        self, expression: Any, by_task: Mapping[str, Sequence[_Instance]]
    ) -> int | str | _Wait:
        """The expansion's length (> 0), or what becomes of the unexpanded task instance
        instead (``skipped``, ``upstream_failed``, ``failed``), or :data:`WAIT_FOR_UPSTREAMS`."""
        waiting = False

        def pushed(task_id: str) -> int | None:
            nonlocal waiting
            instances = by_task.get(task_id, ())
            if any(i.map_index >= 0 or i.plan.mapped for i in instances):
                if any(i.state not in _FINISHED for i in instances):
                    waiting = True
                    return None
                return self.returns.get(task_id, 0)
            return self.task_maps.get(task_id)

        length = length_evaluate(expression, pushed)
        if waiting:
            return WAIT_FOR_UPSTREAMS
        if length is None:
            return TaskInstanceState.UPSTREAM_FAILED.value
        if length == 0:
            return TaskInstanceState.SKIPPED.value
        if length > max_map_length():
            return TaskInstanceState.FAILED.value
        return length


@dataclass
class MapLengths:
    """What the upstreams of several runs pushed for mapped downstreams (2 queries, none
    without runs)."""

    by_run: Mapping[int, RunMapLengths] = field(default_factory=dict)

    @classmethod
    def of_runs(cls, dag_run_ids: Collection[int]) -> MapLengths:
        if not dag_run_ids:
            return cls()
        task_maps: dict[int, dict[str, int]] = defaultdict(dict)
        for run_pk, task_id, length in TaskMap.objects.filter(
            dag_run_id__in=dag_run_ids, map_index=-1
        ).values_list("dag_run_id", "task_id", "length"):
            task_maps[run_pk][task_id] = length
        returns: dict[int, dict[str, int]] = defaultdict(dict)
        for run_pk, task_id, count in (
            XCom.objects.filter(dag_run_id__in=dag_run_ids, key=RETURN_KEY, map_index__gte=0)
            .values_list("dag_run_id", "task_id")
            .annotate(count=Count("pk"))
            .order_by()
        ):
            returns[run_pk][task_id] = count
        return cls(
            {
                run_pk: RunMapLengths(task_maps.get(run_pk, {}), returns.get(run_pk, {}))
                for run_pk in dag_run_ids
            }
        )

    def of_run(self, dag_run_id: int) -> RunMapLengths:
        return self.by_run.get(dag_run_id) or RunMapLengths()


def task_instances_expand(expansions: Sequence[Expansion]) -> list[Expansion]:
    """Write each expansion (its unexpanded task instance becomes map index 0, the others
    copies of it), each in one transaction of three statements; returns those another
    process expanded first (nothing written for them)."""
    lost = []
    for expansion in expansions:
        with transaction.atomic():
            won = TaskInstance.objects.filter(
                pk=expansion.pk, map_index=-1, state__isnull=True
            ).update(map_index=0)
            if not won:
                lost.append(expansion)
                continue
            first = TaskInstance.objects.values(*_COPIED).get(pk=expansion.pk)
            ti_pk = TaskInstance._meta.pk
            assert ti_pk is not None  # noqa: S101 - narrows the type for mypy
            db = connections[DEFAULT_DB_ALIAS]
            model_rows_insert(
                TaskInstance,
                [
                    {
                        **first,
                        "id": str(ti_pk.get_db_prep_value(pk, db)),
                        "map_index": index,
                    }
                    for index, pk in enumerate(expansion.new_pks, start=1)
                ],
            )
    return lost
