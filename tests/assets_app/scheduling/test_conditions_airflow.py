"""Asset conditions against Airflow 3.3's own (the installed ``apache-airflow-core``).

A DAG's ``schedule`` built with Airflow's ``AssetAll`` / ``AssetAny`` (empty ones, one child,
nested, a leaf twice, ``schedule=[]``) goes through the DAG processor's converter
(``runtime.dag_parse.dag_entry``) and the manifest, and must come out as the condition that
Airflow's own serialization (``encode_asset_like``, then ``as_expression()``, what Airflow
stores in ``dag.asset_expression``) reads as; our stored form is Airflow's without the
groups. Airflow's scheduler (``AssetEvaluator``) and ``condition_is_met`` must then agree on
every set of ready assets.

No test here touches the database.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import chain, combinations
from typing import Any

import pytest
from airflow.assets.evaluation import AssetEvaluator
from airflow.sdk import DAG, Asset, AssetAlias
from airflow.sdk.definitions.asset import AssetAll, AssetAny, BaseAsset
from airflow.serialization.decoders import decode_asset_like
from airflow.serialization.definitions.assets import SerializedAssetBase, SerializedAssetUniqueKey
from airflow.serialization.encoders import encode_asset_like

from assets_app.conditions import (
    Resolution,
    condition_expression,
    condition_is_met,
    condition_parse,
)
from assets_app.services.dags.manifest import manifest_parse
from runtime.dag_parse import dag_entry
from task_sdk.definitions import AssetUniqueKey

NAMES = "abc"
A, B, C = (Asset(name, uri=f"s3://w/{name}") for name in NAMES)
IDS = {AssetUniqueKey(name=name, uri=f"s3://w/{name}"): i for i, name in enumerate(NAMES, 1)}

SCHEDULES: list[Any] = [
    pytest.param(lambda: AssetAll(), id="AssetAll()"),
    pytest.param(lambda: AssetAny(), id="AssetAny()"),
    pytest.param(lambda: [], id="schedule=[]"),
    pytest.param(lambda: [A, B], id="schedule=[a, b]"),
    pytest.param(lambda: AssetAll(A), id="AssetAll(a)"),
    pytest.param(lambda: AssetAny(A), id="AssetAny(a)"),
    pytest.param(lambda: AssetAll(AssetAny(AssetAll(A)), B), id="all-in-any-in-all"),
    pytest.param(lambda: AssetAll(A, A), id="a-twice"),
    pytest.param(lambda: AssetAny(AssetAll(), B), id="empty-all-in-any"),
    pytest.param(lambda: AssetAll(AssetAll(), A), id="empty-all-in-all"),
    pytest.param(lambda: AssetAll(AssetAny(), A), id="empty-any-in-all"),
    pytest.param(lambda: AssetAny(AssetAny(), A), id="empty-any-in-any"),
    pytest.param(lambda: A | (B & C), id="a|(b&c)"),
    pytest.param(lambda: (A & B) | AssetAll(C, AssetAny()), id="(a&b)|all(c,any())"),
]


def airflow_expression(condition: BaseAsset) -> Any:
    """What Airflow stores for a condition: its serialized form's ``as_expression()``."""
    return serialized(condition).as_expression()


def serialized(condition: BaseAsset) -> SerializedAssetBase:
    return decode_asset_like(encode_asset_like(condition))


def without_groups(expression: Any) -> Any:
    """Airflow's expression as we store it: an asset or alias without its group."""
    if isinstance(expression, list):
        return [without_groups(node) for node in expression]
    ((kind, body),) = expression.items()
    if kind in ("all", "any"):
        return {kind: without_groups(body)}
    return {kind: {key: value for key, value in body.items() if key != "group"}}


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_a_dag_schedule_reads_as_airflow_serializes_it(schedule: Callable[[], Any]):
    # given a DAG as Airflow builds it
    dag = DAG("d", schedule=schedule())

    # when the DAG processor's converter and the manifest read it
    entry = dag_entry(dag, path="/dags/d.py")
    declared = manifest_parse({"dags": [entry]}).dags[0].schedule

    # then it is the condition Airflow's own stored expression reads as
    assert declared is not None
    expression = airflow_expression(dag.timetable.asset_condition)
    assert condition_parse(expression) == declared
    assert condition_expression(declared) == without_groups(expression)


def ready_sets() -> list[set[int]]:
    ids = sorted(IDS.values())
    return [set(ready) for ready in chain.from_iterable(combinations(ids, n) for n in range(4))]


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_a_condition_is_met_when_airflows_scheduler_says_so(schedule: Callable[[], Any]):
    # given Airflow's condition and ours, read from what Airflow stores
    built = schedule()
    airflow = serialized(built if isinstance(built, BaseAsset) else AssetAll(*built))
    ours = condition_parse(airflow.as_expression())
    evaluator = AssetEvaluator(None)  # assets only: no session needed

    for ready in ready_sets():
        # when
        statuses = {
            SerializedAssetUniqueKey(name=key.name, uri=key.uri): True
            for key, asset_id in IDS.items()
            if asset_id in ready
        }

        # then
        expected = evaluator.run(airflow, statuses)
        met = condition_is_met(ours, resolution=Resolution(asset_ids=IDS), ready_asset_ids=ready)
        assert met is expected, ready


def test_an_alias_and_refs_read_as_airflow_serializes_them():
    condition = AssetAll(AssetAlias("x"), Asset.ref(name="n"), Asset.ref(uri="s3://w/u"))
    dag = DAG("d", schedule=condition)

    declared = manifest_parse({"dags": [dag_entry(dag, path="/dags/d.py")]}).dags[0].schedule

    assert declared is not None
    assert condition_parse(airflow_expression(condition)) == declared
    assert condition_expression(declared) == without_groups(airflow_expression(condition))
