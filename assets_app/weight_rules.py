"""A task instance's priority: its task's ``priority_weight`` with its ``weight_rule`` applied
over the DAG's graph (Airflow's ``airflow.task.priority_strategy``), the order in which
claimable task instances are claimed (``services.runs.claims``), highest first.

- ``downstream`` (Airflow's default): its own weight plus the weights of every task
  downstream of it, directly or not, each counted once;
- ``upstream``: its own weight plus the weights of every task upstream of it;
- ``absolute``: its own weight.

The result is clamped to a 32-bit integer, as Airflow's ``db_safe_priority`` does.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass


class WeightRule(enum.StrEnum):
    DOWNSTREAM = "downstream"
    UPSTREAM = "upstream"
    ABSOLUTE = "absolute"


DEFAULT_WEIGHT_RULE = WeightRule.DOWNSTREAM
WEIGHT_RULE_VALUES = tuple(rule.value for rule in WeightRule)

#: Airflow's ``DB_SAFE_MINIMUM`` / ``DB_SAFE_MAXIMUM`` (a 32-bit integer column).
PRIORITY_MIN = -(2**31)
PRIORITY_MAX = 2**31 - 1


@dataclass(frozen=True)
class WeightedTask:
    """What the rule reads of one task."""

    upstream: tuple[str, ...]
    priority_weight: int = 1
    weight_rule: str = DEFAULT_WEIGHT_RULE.value


def _relatives(start: str, edges: Mapping[str, Iterable[str]]) -> set[str]:
    """Every task reachable from ``start`` along ``edges`` (``start`` itself excluded)."""
    seen: set[str] = set()
    stack = list(edges.get(start, ()))
    while stack:
        task_id = stack.pop()
        if task_id not in seen and task_id != start:
            seen.add(task_id)
            stack.extend(edges.get(task_id, ()))
    return seen


def db_safe_priority(weight: int) -> int:
    return max(PRIORITY_MIN, min(PRIORITY_MAX, weight))


def priority_weights(tasks: Mapping[str, WeightedTask]) -> dict[str, int]:
    """Each task's priority (task id → weight) under its own weight rule; upstreams naming
    no task of ``tasks`` are ignored."""
    upstream: dict[str, list[str]] = {
        task_id: [up for up in task.upstream if up in tasks] for task_id, task in tasks.items()
    }
    downstream: dict[str, list[str]] = {task_id: [] for task_id in tasks}
    for task_id, ups in upstream.items():
        for up in ups:
            downstream[up].append(task_id)
    weights = {}
    for task_id, task in tasks.items():
        if task.weight_rule == WeightRule.ABSOLUTE:
            relatives: set[str] = set()
        elif task.weight_rule == WeightRule.UPSTREAM:
            relatives = _relatives(task_id, upstream)
        else:
            relatives = _relatives(task_id, downstream)
        weights[task_id] = db_safe_priority(
            task.priority_weight + sum(tasks[other].priority_weight for other in relatives)
        )
    return weights
