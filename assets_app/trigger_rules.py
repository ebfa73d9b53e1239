"""Trigger rules: when may a task instance run, given the states of its direct upstreams.

A pure module (no database): the scheduler counts the finished upstream task instances of each
waiting task instance and asks :func:`trigger_rule_evaluate` what becomes of it. The decisions
are Airflow 3.3's ``TriggerRuleDep._evaluate_direct_relatives`` with ``flag_upstream_failed``
on (what the scheduler's ``DagRun.task_instance_scheduling_decisions`` uses): first whether the
task instance can never run (→ ``upstream_failed`` or ``skipped``), then whether the rule holds
(→ ready to be ``scheduled``) or it must wait for more upstreams to finish.

The counts are of task instances: a mapped upstream counts each of its map indexes (the
scheduler gathers them, ``services.runs.advance``). The registry does not shrink an expanded
task (no map index is ever ``removed``), so Airflow's ``removed`` branch for mapped
downstreams does not apply.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable


class TriggerRule(enum.StrEnum):
    """Airflow's 13 trigger rules (``airflow.task.trigger_rule.TriggerRule``)."""

    ALL_SUCCESS = "all_success"
    ALL_FAILED = "all_failed"
    ALL_DONE = "all_done"
    ALL_DONE_MIN_ONE_SUCCESS = "all_done_min_one_success"
    ALL_DONE_SETUP_SUCCESS = "all_done_setup_success"
    ONE_SUCCESS = "one_success"
    ONE_FAILED = "one_failed"
    ONE_DONE = "one_done"
    NONE_FAILED = "none_failed"
    NONE_SKIPPED = "none_skipped"
    ALWAYS = "always"
    NONE_FAILED_MIN_ONE_SUCCESS = "none_failed_min_one_success"
    ALL_SKIPPED = "all_skipped"


DEFAULT_TRIGGER_RULE = TriggerRule.ALL_SUCCESS
TRIGGER_RULE_VALUES: tuple[str, ...] = tuple(rule.value for rule in TriggerRule)


class Decision(enum.StrEnum):
    """What becomes of a task instance that has no state yet."""

    READY = "ready"  # its rule holds: make it ``scheduled``
    WAIT = "wait"  # not yet decidable: leave it without a state
    UPSTREAM_FAILED = "upstream_failed"  # it can never run because an upstream failed
    SKIPPED = "skipped"  # it can never run because of skipped (or non-failed) upstreams


@dataclasses.dataclass(frozen=True, kw_only=True)
class UpstreamCounts:
    """How many of a task instance's direct upstreams are in each finished state.

    ``upstream`` is the number of direct upstreams (finished or not); ``done`` is derived: the
    upstreams in a finished state. ``*_setup`` count the setup tasks among them (Airflow's
    setup/teardown; zero when the DAG declares none).
    """

    upstream: int
    success: int = 0
    skipped: int = 0
    failed: int = 0
    upstream_failed: int = 0
    removed: int = 0
    upstream_setup: int = 0
    success_setup: int = 0
    skipped_setup: int = 0

    def __post_init__(self) -> None:
        if min(dataclasses.astuple(self)) < 0:
            raise ValueError("upstream counts cannot be negative")
        if self.done > self.upstream:
            raise ValueError(f"{self.done} finished upstreams but only {self.upstream} upstreams")

    @property
    def done(self) -> int:
        return self.success + self.skipped + self.failed + self.upstream_failed + self.removed


def _never_runs(rule: TriggerRule, c: UpstreamCounts) -> Decision | None:  # noqa: C901 - one branch per rule, as Airflow's
    """Airflow's ``flag_upstream_failed`` branch: the state to set now, or ``None``."""
    upstream_done = c.done >= c.upstream
    if rule is TriggerRule.ALL_SUCCESS:
        if c.upstream_failed or c.failed:
            return Decision.UPSTREAM_FAILED
        if c.skipped:
            return Decision.SKIPPED
    elif rule is TriggerRule.ALL_FAILED:
        if c.success or c.skipped:
            return Decision.SKIPPED
    elif rule is TriggerRule.ONE_SUCCESS:
        if upstream_done and c.done == c.skipped:
            return Decision.SKIPPED
        if upstream_done and c.success <= 0:
            return Decision.UPSTREAM_FAILED
    elif rule is TriggerRule.ONE_FAILED:
        if upstream_done and not (c.failed or c.upstream_failed):
            return Decision.SKIPPED
    elif rule is TriggerRule.ONE_DONE:
        if upstream_done and not (c.failed or c.success):
            return Decision.SKIPPED
    elif rule is TriggerRule.NONE_FAILED:
        if c.upstream_failed or c.failed:
            return Decision.UPSTREAM_FAILED
    elif rule is TriggerRule.NONE_FAILED_MIN_ONE_SUCCESS:
        if c.upstream_failed or c.failed:
            return Decision.UPSTREAM_FAILED
        if c.skipped == c.upstream:
            return Decision.SKIPPED
        if upstream_done and c.success == 0:
            return Decision.UPSTREAM_FAILED
    elif rule is TriggerRule.NONE_SKIPPED:
        if c.skipped:
            return Decision.SKIPPED
    elif rule is TriggerRule.ALL_SKIPPED:
        if c.success or c.failed or c.upstream_failed:
            return Decision.SKIPPED
    elif rule is TriggerRule.ALL_DONE_MIN_ONE_SUCCESS:
        non_skipped_done = c.success + c.failed + c.upstream_failed + c.removed
        if c.skipped > 0:
            return Decision.SKIPPED
        if non_skipped_done >= c.upstream - c.skipped and c.success == 0:
            return Decision.UPSTREAM_FAILED
    elif rule is TriggerRule.ALL_DONE_SETUP_SUCCESS:
        if upstream_done and c.upstream_setup and c.skipped_setup >= c.upstream_setup:
            return Decision.SKIPPED
        if upstream_done and c.upstream_setup and c.success_setup == 0:
            return Decision.UPSTREAM_FAILED
    return None


def _all_done(c: UpstreamCounts) -> bool:
    return c.done >= c.upstream


def _all_done_min_one_success(c: UpstreamCounts) -> bool:
    non_skipped_done = c.success + c.failed + c.upstream_failed
    non_skipped_upstream = c.upstream - c.skipped - c.removed
    return c.skipped <= 0 and non_skipped_done >= non_skipped_upstream and c.success > 0


#: Airflow's second half: does the dependency pass (the task instance may be scheduled)?
_RULE_HOLDS: dict[TriggerRule, Callable[[UpstreamCounts], bool]] = {
    TriggerRule.ALWAYS: lambda c: True,
    TriggerRule.ONE_SUCCESS: lambda c: c.success > 0,
    TriggerRule.ONE_FAILED: lambda c: bool(c.failed or c.upstream_failed),
    TriggerRule.ONE_DONE: lambda c: c.success + c.failed > 0,
    TriggerRule.ALL_SUCCESS: lambda c: c.upstream - c.success - c.removed <= 0,
    TriggerRule.ALL_FAILED: lambda c: c.upstream - c.failed - c.upstream_failed - c.removed <= 0,
    TriggerRule.ALL_DONE: _all_done,
    TriggerRule.NONE_FAILED: lambda c: c.upstream - c.success - c.skipped - c.removed <= 0,
    TriggerRule.NONE_FAILED_MIN_ONE_SUCCESS: (
        lambda c: c.upstream - c.success - c.skipped - c.removed <= 0 and c.success > 0
    ),
    TriggerRule.NONE_SKIPPED: lambda c: _all_done(c) and c.skipped <= 0,
    TriggerRule.ALL_SKIPPED: lambda c: c.upstream - c.skipped <= 0,
    TriggerRule.ALL_DONE_SETUP_SUCCESS: (
        lambda c: _all_done(c) and not (c.upstream_setup and not c.success_setup)
    ),
    TriggerRule.ALL_DONE_MIN_ONE_SUCCESS: _all_done_min_one_success,
}


def trigger_rule_evaluate(*, rule: TriggerRule | str, counts: UpstreamCounts) -> Decision:
    """Decide what becomes of a state-less task instance, as Airflow's scheduler would.

    A task instance without upstreams is always ready (Airflow skips the dependency check).
    ``ValueError`` for a rule that is not one of the 13.
    """
    rule = TriggerRule(rule)
    if counts.upstream == 0 or rule is TriggerRule.ALWAYS:
        return Decision.READY
    never = _never_runs(rule, counts)
    if never is not None:
        return never
    return Decision.READY if _RULE_HOLDS[rule](counts) else Decision.WAIT
