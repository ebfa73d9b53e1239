"""Pools, priorities and concurrency limits where task instances are claimed (Airflow's
``_executable_task_instances_to_queued``), and the pool writes every face shares."""

from __future__ import annotations

from datetime import timedelta

import pytest
import yaml
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from assets_app.exceptions import PoolExistsError, PoolInputError, PoolNotFoundError
from assets_app.models import DagRun, Pool, TaskInstance
from assets_app.selectors.runs import pools_slots, task_instance_waiting_reason
from assets_app.services.dags.declare import dags_declare
from assets_app.services.dags.manifest import manifest_parse
from assets_app.services.inputs import KEEP
from assets_app.services.runs.claims import CANDIDATE_MARGIN, task_instances_claim
from assets_app.services.runs.dag_runs import dag_run_trigger
from assets_app.services.runs.pools import (
    PoolSpec,
    default_pool_ensure,
    pool_create,
    pool_delete,
    pool_set,
    pool_update,
    pools_export,
    pools_import,
)
from assets_app.weight_rules import WeightedTask, priority_weights

pytestmark = pytest.mark.django_db


def declare(text: str) -> None:
    dags_declare(manifest=manifest_parse(yaml.safe_load(text)), fileloc="pools.yaml")


_runs = iter(range(1_000_000))


def trigger(dag_id: str, *, age: int = 0) -> DagRun:
    """A run of ``dag_id`` ``age`` seconds old (older runs are claimed first among equals)."""
    when = timezone.now() - timedelta(seconds=age, microseconds=next(_runs))
    return dag_run_trigger(dag_id=dag_id, logical_date=when, run_after=when)


def claimed_ids(limit: int = 10) -> list[str]:
    return [ti.task_id for ti in task_instances_claim(limit=limit)]


def finish(*task_ids: str) -> None:
    TaskInstance.objects.filter(task_id__in=task_ids, state="queued").update(state="success")


# --- default_pool ----------------------------------------------------------------------------


def test_default_pool_exists_with_128_slots_and_is_recreated():
    assert Pool.objects.get(pool="default_pool").slots == 128
    Pool.objects.filter(pool="default_pool").delete()
    assert default_pool_ensure() is True
    assert Pool.objects.get(pool="default_pool").slots == 128
    assert default_pool_ensure() is False


def test_default_pool_cannot_be_deleted_nor_its_description_changed():
    with pytest.raises(PoolInputError, match="Default Pool can't be deleted"):
        pool_delete(name="default_pool")
    with pytest.raises(PoolInputError, match="Only slots and include_deferred"):
        pool_update(name="default_pool", description="mine")
    assert pool_update(name="default_pool", slots=5).slots == 5


# --- weight rules ----------------------------------------------------------------------------


def test_weight_rules_sum_over_the_graph_as_airflow():
    # a -> b -> d, a -> c -> d; weights 1, 2, 3, 4
    graph = {
        "a": WeightedTask(upstream=(), priority_weight=1),
        "b": WeightedTask(upstream=("a",), priority_weight=2),
        "c": WeightedTask(upstream=("a",), priority_weight=3),
        "d": WeightedTask(upstream=("b", "c"), priority_weight=4),
    }
    assert priority_weights(graph) == {"a": 10, "b": 6, "c": 7, "d": 4}

    def ruled(rule: str) -> dict[str, WeightedTask]:
        return {k: WeightedTask(v.upstream, v.priority_weight, rule) for k, v in graph.items()}

    assert priority_weights(ruled("upstream")) == {"a": 1, "b": 3, "c": 4, "d": 10}
    assert priority_weights(ruled("absolute")) == {"a": 1, "b": 2, "c": 3, "d": 4}


def test_weights_are_clamped_to_32_bits():
    graph = {
        "a": WeightedTask(upstream=(), priority_weight=2**31 - 1),
        "b": WeightedTask(upstream=("a",), priority_weight=2**31 - 1),
    }
    assert priority_weights(graph)["a"] == 2**31 - 1


def test_a_task_instance_stores_its_pool_and_computed_priority():
    Pool.objects.create(pool="p", slots=3)
    declare(
        """
dags:
  - dag_id: d
    tasks:
      - {task_id: a, pool: p, pool_slots: 2, priority_weight: 5}
      - {task_id: b, upstream: [a], priority_weight: 7}
      - {task_id: c, upstream: [a], priority_weight: 9, weight_rule: upstream}
"""
    )
    run = trigger("d")
    rows = {
        ti.task_id: (ti.pool, ti.pool_slots, ti.priority_weight)
        for ti in TaskInstance.objects.filter(dag_run=run)
    }
    assert rows == {"a": ("p", 2, 21), "b": ("default_pool", 1, 7), "c": ("default_pool", 1, 14)}


# --- pools at the claim ----------------------------------------------------------------------


def test_a_pool_caps_what_is_claimed_by_slots():
    Pool.objects.create(pool="p", slots=3)
    declare(
        """
dags:
  - dag_id: d
    tasks:
      - {task_id: big, pool: p, pool_slots: 2, priority_weight: 10}
      - {task_id: s1, pool: p}
      - {task_id: s2, pool: p}
"""
    )
    trigger("d")

    assert claimed_ids() == ["big", "s1"]  # 2 + 1 of 3 slots
    assert claimed_ids() == []
    stats = pools_slots(["p"])["p"]
    assert (stats.queued, stats.scheduled, stats.open(Pool.objects.get(pool="p"))) == (3, 1, 0)
    finish("big")
    assert claimed_ids() == ["s2"]


def test_a_task_needing_more_slots_than_open_lets_a_lower_one_pass():
    Pool.objects.create(pool="p", slots=2)
    declare(
        """
dags:
  - dag_id: d
    tasks:
      - {task_id: first, pool: p}
      - {task_id: big, pool: p, pool_slots: 2, priority_weight: 5}
      - {task_id: small, pool: p, priority_weight: 1}
"""
    )
    trigger("d")
    TaskInstance.objects.filter(task_id="first").update(state="running")

    assert claimed_ids() == ["small"]  # big needs 2, 1 is open


def test_a_missing_pool_holds_its_task_instances_until_it_is_created():
    declare(
        """
dags:
  - dag_id: d
    tasks: [{task_id: t, pool: nowhere}, {task_id: u}]
"""
    )
    trigger("d")

    assert claimed_ids() == ["u"]
    ti = TaskInstance.objects.get(task_id="t")
    assert "pool 'nowhere' does not exist" in (task_instance_waiting_reason(ti) or "")
    assert claimed_ids() == []

    pool_set(PoolSpec(name="nowhere", slots=1))
    assert task_instance_waiting_reason(ti) is None
    assert claimed_ids() == ["t"]


def test_a_task_asking_more_slots_than_the_pool_has_never_runs_and_says_why():
    Pool.objects.create(pool="p", slots=1)
    declare("dags: [{dag_id: d, tasks: [{task_id: t, pool: p, pool_slots: 2}]}]")
    trigger("d")

    assert claimed_ids() == []
    reason = task_instance_waiting_reason(TaskInstance.objects.get(task_id="t"))
    assert reason is not None
    assert "takes 2 slots of pool 'p', which has 1" in reason


def test_unlimited_pool_and_deferred_slots():
    Pool.objects.create(pool="inf", slots=-1)
    Pool.objects.create(pool="defer", slots=1, include_deferred=True)
    declare(
        """
dags:
  - dag_id: d
    max_active_tasks: 100
    tasks:
      - {task_id: i1, pool: inf, pool_slots: 1000}
      - {task_id: i2, pool: inf, pool_slots: 1000}
      - {task_id: x, pool: defer}
      - {task_id: y, pool: defer}
"""
    )
    trigger("d")
    TaskInstance.objects.filter(task_id="x").update(state="deferred")

    assert sorted(claimed_ids()) == ["i1", "i2"]  # y: the deferred x holds the one slot
    Pool.objects.filter(pool="defer").update(include_deferred=False)
    assert claimed_ids() == ["y"]


# --- priority and limits ---------------------------------------------------------------------


def test_higher_priority_first_then_the_oldest_run():
    declare(
        """
dags:
  - dag_id: low
    tasks: [{task_id: low, priority_weight: 1}]
  - dag_id: high
    tasks: [{task_id: high, priority_weight: 50}]
"""
    )
    trigger("low", age=100)
    trigger("low", age=50)
    trigger("high", age=1)

    claimed = task_instances_claim(limit=2)
    assert [ti.task_id for ti in claimed] == ["high", "low"]
    older = DagRun.objects.filter(dag_id="low").order_by("run_after").first()
    assert claimed[1].dag_run_id == older.pk


def test_downstream_weight_runs_the_longer_branch_first():
    declare(
        """
dags:
  - dag_id: d
    max_active_tasks: 1
    tasks:
      - {task_id: lone}
      - {task_id: head}
      - {task_id: mid, upstream: [head]}
      - {task_id: tail, upstream: [mid]}
"""
    )
    trigger("d")
    assert claimed_ids() == ["head"]  # 3 (itself and two downstream) over 1


def test_max_active_tis_per_dag_spans_runs_and_per_dagrun_one_run():
    declare(
        """
dags:
  - dag_id: d
    tasks:
      - {task_id: one, max_active_tis_per_dag: 1}
      - {task_id: two, max_active_tis_per_dagrun: 1}
"""
    )
    trigger("d", age=30)
    trigger("d", age=20)

    assert sorted(claimed_ids()) == ["one", "two", "two"]  # `one` once, `two` once per run
    assert claimed_ids() == []
    finish("one")
    assert claimed_ids() == ["one"]


def test_max_active_tasks_counts_per_run_as_airflow_3():
    declare(
        """
dags:
  - dag_id: wide
    max_active_tasks: 1
    tasks: [{task_id: a}, {task_id: b}]
"""
    )
    trigger("wide", age=20)
    trigger("wide", age=10)
    assert claimed_ids() == ["a", "a"]  # one per run


def test_held_back_candidates_do_not_starve_claimable_ones():
    # more blocked task instances, at a higher priority, than one pass reads
    declare(
        """
dags:
  - dag_id: busy
    max_active_runs: 100
    tasks: [{task_id: one_at_a_time, max_active_tis_per_dag: 1, priority_weight: 100}]
  - dag_id: other
    tasks: [{task_id: cheap}]
"""
    )
    for age in range(CANDIDATE_MARGIN + 12):
        trigger("busy", age=100 + age)
    trigger("other")

    assert sorted(claimed_ids(limit=10)) == ["cheap", "one_at_a_time"]


def test_the_claim_statements_are_pinned():
    declare(
        """
dags:
  - dag_id: d
    max_active_runs: 50
    tasks: [{task_id: a, max_active_tis_per_dagrun: 1}, {task_id: b}]
"""
    )
    # no pool has a scheduled task instance: the pool lock only
    with CaptureQueriesContext(connection) as nothing:
        assert task_instances_claim(limit=5) == []
    trigger("d")
    # pool lock, slot count, candidates, DAG lock, active counts, update
    with CaptureQueriesContext(connection) as one:
        assert len(task_instances_claim(limit=5)) == 2
    for age in range(20):
        trigger("d", age=age + 1)
    with CaptureQueriesContext(connection) as many:
        assert len(task_instances_claim(limit=5)) == 5
    # each inside the claim's savepoint (SAVEPOINT, RELEASE) of the test's transaction
    assert (len(nothing), len(one), len(many)) == (1 + 2, 6 + 2, 6 + 2)


# --- the writes ------------------------------------------------------------------------------


def test_pool_writes_and_their_refusals():
    pool = pool_create(PoolSpec(name="p", slots=2, description="d"))
    assert (pool.slots, pool.description, pool.include_deferred) == (2, "d", False)
    with pytest.raises(PoolExistsError):
        pool_create(PoolSpec(name="p", slots=3))
    assert pool_set(PoolSpec(name="p", slots=4, include_deferred=True)).slots == 4
    assert pool_update(name="p", description=KEEP, slots=6).slots == 6
    with pytest.raises(PoolNotFoundError):
        pool_update(name="nope", slots=1)
    with pytest.raises(PoolNotFoundError):
        pool_delete(name="nope")
    for bad, field in [
        (PoolSpec(name="", slots=1), "name"),
        (PoolSpec(name="x" * 257, slots=1), "name"),
        (PoolSpec(name="x", slots=-2), "slots"),
        (PoolSpec(name="x", slots=True), "slots"),  # type: ignore[arg-type]
        (PoolSpec(name="x", slots=1, include_deferred="yes"), "include_deferred"),  # type: ignore[arg-type]
    ]:
        with pytest.raises(PoolInputError) as info:
            pool_set(bad)
        assert info.value.context["field"] == field
    pool_delete(name="p")
    assert not Pool.objects.filter(pool="p").exists()


def test_import_and_export_round_trip_all_or_nothing():
    pools_import(
        {"a": {"slots": 1, "description": "A"}, "b": {"slots": 2, "include_deferred": True}}
    )
    exported = pools_export()
    assert exported["a"] == {"description": "A", "slots": 1, "include_deferred": False}
    assert exported["b"]["include_deferred"] is True
    assert "default_pool" in exported

    with pytest.raises(PoolInputError, match="pool 'd': slots must be"):
        pools_import({"c": {"slots": 1}, "d": {"slots": "many"}})
    assert not Pool.objects.filter(pool="c").exists()
    with pytest.raises(PoolInputError, match="unknown key"):
        pools_import({"c": {"slots": 1, "colour": "red"}})
    with pytest.raises(PoolInputError, match="expected a JSON object"):
        pools_import(["a"])


@pytest.mark.parametrize(
    ("task", "message"),
    [
        pytest.param("pool_slots: 0", "pool_slots: expected a whole number from 1", id="slots"),
        pytest.param("pool: ''", "pool: expected a pool name", id="pool"),
        pytest.param("weight_rule: sideways", "unknown weight rule 'sideways'", id="rule"),
        pytest.param("priority_weight: 1.5", "priority_weight: expected a whole", id="weight"),
        pytest.param("max_active_tis_per_dag: 0", "max_active_tis_per_dag: expected", id="dag"),
        pytest.param("max_active_tis_per_dagrun: x", "max_active_tis_per_dagrun", id="dagrun"),
    ],
)
def test_the_manifest_refuses_bad_pool_and_priority_fields(task, message):
    from assets_app.exceptions import ManifestError

    text = f"dags: [{{dag_id: nightly, tasks: [{{task_id: load, {task}}}]}}]"
    with pytest.raises(ManifestError) as info:
        manifest_parse(yaml.safe_load(text), source="dags.yaml")
    assert "DAG 'nightly', task 'load'" in info.value.message
    assert message in info.value.message


def test_a_clear_takes_the_pool_and_priority_declared_now():
    from assets_app.services.runs.clearing import task_instances_clear

    declare("dags: [{dag_id: d, tasks: [{task_id: t}]}]")
    run = trigger("d")
    TaskInstance.objects.filter(dag_run=run).update(state="success")
    declare(
        "dags: [{dag_id: d, tasks: [{task_id: t, pool: p, pool_slots: 3, priority_weight: 9}]}]"
    )

    task_instances_clear(task_instances=TaskInstance.objects.filter(dag_run=run))

    ti = TaskInstance.objects.get(dag_run=run)
    assert (ti.pool, ti.pool_slots, ti.priority_weight) == ("p", 3, 9)


def test_weight_rules_agree_with_airflows_strategies_on_random_graphs():
    # Airflow's own strategies (airflow/task/priority_strategy.py) over its own operators
    pytest.importorskip("airflow.task.priority_strategy")
    import random
    from types import SimpleNamespace

    from airflow.providers.standard.operators.empty import EmptyOperator
    from airflow.sdk import DAG
    from airflow.task.priority_strategy import get_airflow_priority_weight_strategies

    strategies = get_airflow_priority_weight_strategies()
    rng = random.Random(7)
    for trial in range(30):
        n = rng.randint(1, 9)
        rules = [rng.choice(["downstream", "upstream", "absolute"]) for _ in range(n)]
        weights = [rng.randint(-5, 20) for _ in range(n)]
        with DAG(dag_id=f"d{trial}", schedule=None):
            ops = [
                EmptyOperator(task_id=f"t{i}", priority_weight=weights[i], weight_rule=rules[i])
                for i in range(n)
            ]
            for j in range(n):
                for i in range(j):
                    if rng.random() < 0.35:
                        ops[i] >> ops[j]
        theirs = {
            op.task_id: strategies[rules[i]]().get_weight(SimpleNamespace(task=op))
            for i, op in enumerate(ops)
        }
        ours = priority_weights(
            {
                op.task_id: WeightedTask(tuple(op.upstream_task_ids), weights[i], rules[i])
                for i, op in enumerate(ops)
            }
        )
        assert ours == theirs, trial
