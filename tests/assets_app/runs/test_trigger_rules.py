"""Trigger rules against a table of upstream-state combinations.

Each row is read off Airflow 3.3's ``TriggerRuleDep._evaluate_direct_relatives`` (with
``flag_upstream_failed``, as the scheduler calls it): the first half decides "can never run"
(``upstream_failed`` / ``skipped``), the second whether the dependency passes (ready) or fails
(wait). Counts are of direct upstreams: n = how many, then success / skipped / failed /
upstream_failed / removed; those not listed are unfinished.
"""

from __future__ import annotations

import pytest

from assets_app.trigger_rules import (
    TRIGGER_RULE_VALUES,
    Decision,
    TriggerRule,
    UpstreamCounts,
    trigger_rule_evaluate,
)

R = Decision.READY
W = Decision.WAIT
UF = Decision.UPSTREAM_FAILED
SK = Decision.SKIPPED

# (rule, n, success, skipped, failed, upstream_failed, removed) -> decision
TABLE: list[tuple[str, int, int, int, int, int, int, Decision]] = [
    # all_success: any failure -> upstream_failed, any skip -> skipped, else wait for all
    ("all_success", 3, 0, 0, 0, 0, 0, W),
    ("all_success", 3, 2, 0, 0, 0, 0, W),
    ("all_success", 3, 3, 0, 0, 0, 0, R),
    ("all_success", 3, 1, 0, 1, 0, 0, UF),
    ("all_success", 3, 1, 0, 0, 1, 0, UF),
    ("all_success", 3, 1, 1, 0, 0, 0, SK),
    ("all_success", 3, 1, 1, 1, 0, 0, UF),  # failure wins over skip
    ("all_success", 2, 1, 0, 0, 0, 1, R),  # removed counts as success
    # all_failed: a success or a skip -> skipped; ready when all failed/upstream_failed
    ("all_failed", 2, 0, 0, 1, 0, 0, W),
    ("all_failed", 2, 0, 0, 1, 1, 0, R),
    ("all_failed", 2, 1, 0, 1, 0, 0, SK),
    ("all_failed", 2, 0, 1, 1, 0, 0, SK),
    # all_done: wait for every upstream, whatever its state
    ("all_done", 3, 1, 1, 0, 0, 0, W),
    ("all_done", 3, 1, 1, 1, 0, 0, R),
    ("all_done", 2, 0, 0, 0, 2, 0, R),
    # all_done_min_one_success: any skip -> skipped; all done, no success -> upstream_failed
    ("all_done_min_one_success", 3, 1, 0, 1, 0, 0, W),
    ("all_done_min_one_success", 3, 1, 0, 2, 0, 0, R),
    ("all_done_min_one_success", 3, 0, 0, 2, 1, 0, UF),
    ("all_done_min_one_success", 3, 1, 1, 0, 0, 0, SK),
    ("all_done_min_one_success", 2, 1, 0, 0, 0, 1, R),
    # all_done_setup_success without setup tasks: all_done
    ("all_done_setup_success", 2, 0, 0, 1, 0, 0, W),
    ("all_done_setup_success", 2, 0, 1, 1, 0, 0, R),
    # one_success: ready at the first success; all done -> skipped if all skipped, else UF
    ("one_success", 3, 0, 0, 0, 0, 0, W),
    ("one_success", 3, 1, 0, 0, 0, 0, R),
    ("one_success", 3, 0, 1, 1, 0, 0, W),
    ("one_success", 3, 0, 3, 0, 0, 0, SK),
    ("one_success", 3, 0, 2, 1, 0, 0, UF),
    # one_failed: ready at the first failure; all done without one -> skipped
    ("one_failed", 3, 1, 0, 0, 0, 0, W),
    ("one_failed", 3, 0, 0, 1, 0, 0, R),
    ("one_failed", 3, 0, 0, 0, 1, 0, R),
    ("one_failed", 3, 2, 1, 0, 0, 0, SK),
    # one_done: a success or a failure is enough; all done with neither -> skipped
    ("one_done", 3, 0, 1, 0, 0, 0, W),
    ("one_done", 3, 0, 0, 1, 0, 0, R),
    ("one_done", 3, 1, 0, 0, 0, 0, R),
    ("one_done", 2, 0, 1, 0, 1, 0, SK),
    # none_failed: a failure -> upstream_failed; ready when all success/skipped
    ("none_failed", 3, 1, 1, 0, 0, 0, W),
    ("none_failed", 3, 1, 2, 0, 0, 0, R),
    ("none_failed", 3, 0, 3, 0, 0, 0, R),
    ("none_failed", 3, 1, 0, 0, 1, 0, UF),
    # none_failed_min_one_success: as none_failed, and all skipped -> skipped, no success -> UF
    ("none_failed_min_one_success", 3, 1, 1, 0, 0, 0, W),
    ("none_failed_min_one_success", 3, 1, 2, 0, 0, 0, R),
    ("none_failed_min_one_success", 3, 0, 3, 0, 0, 0, SK),
    ("none_failed_min_one_success", 3, 1, 0, 1, 0, 0, UF),
    ("none_failed_min_one_success", 2, 0, 1, 0, 0, 1, UF),
    # none_skipped: any skip -> skipped; ready when all done without skips
    ("none_skipped", 3, 1, 0, 1, 0, 0, W),
    ("none_skipped", 3, 1, 0, 1, 1, 0, R),
    ("none_skipped", 3, 1, 1, 0, 0, 0, SK),
    # all_skipped: a success or failure -> skipped; ready when all skipped
    ("all_skipped", 2, 0, 1, 0, 0, 0, W),
    ("all_skipped", 2, 0, 2, 0, 0, 0, R),
    ("all_skipped", 2, 1, 1, 0, 0, 0, SK),
    ("all_skipped", 2, 0, 1, 0, 1, 0, SK),
    # always: ready at once
    ("always", 3, 0, 0, 0, 0, 0, R),
    ("always", 3, 0, 0, 3, 0, 0, R),
]


@pytest.mark.parametrize(("rule", "n", "s", "k", "f", "uf", "r", "expected"), TABLE)
def test_trigger_rule_table(
    rule: str, n: int, s: int, k: int, f: int, uf: int, r: int, expected: Decision
) -> None:
    counts = UpstreamCounts(
        upstream=n, success=s, skipped=k, failed=f, upstream_failed=uf, removed=r
    )
    assert trigger_rule_evaluate(rule=rule, counts=counts) is expected


def test_table_covers_every_rule() -> None:
    assert {row[0] for row in TABLE} == set(TRIGGER_RULE_VALUES)
    assert len(TRIGGER_RULE_VALUES) == 13


@pytest.mark.parametrize("rule", TRIGGER_RULE_VALUES)
def test_no_upstream_is_always_ready(rule: str) -> None:
    assert trigger_rule_evaluate(rule=rule, counts=UpstreamCounts(upstream=0)) is R


def test_setup_tasks_decide_all_done_setup_success() -> None:
    rule = TriggerRule.ALL_DONE_SETUP_SUCCESS
    one_setup = {"upstream": 2, "upstream_setup": 1}
    ran = UpstreamCounts(success=1, failed=1, success_setup=1, **one_setup)
    skipped = UpstreamCounts(skipped=1, failed=1, skipped_setup=1, **one_setup)
    failed = UpstreamCounts(success=1, failed=1, **one_setup)
    assert trigger_rule_evaluate(rule=rule, counts=ran) is R
    assert trigger_rule_evaluate(rule=rule, counts=skipped) is SK
    assert trigger_rule_evaluate(rule=rule, counts=failed) is UF


def test_unknown_rule_and_impossible_counts_are_refused() -> None:
    with pytest.raises(ValueError, match="dummy"):
        trigger_rule_evaluate(rule="dummy", counts=UpstreamCounts(upstream=1))
    with pytest.raises(ValueError, match="only 1 upstreams"):
        UpstreamCounts(upstream=1, success=1, failed=1)
    with pytest.raises(ValueError, match="negative"):
        UpstreamCounts(upstream=1, success=-1)
