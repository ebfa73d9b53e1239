"""The asset condition evaluator, without a database."""

from __future__ import annotations

import pytest

from assets_app.conditions import (
    AllOf,
    AnyOf,
    ConditionReferences,
    Resolution,
    condition_expression,
    condition_is_met,
    condition_parse,
    condition_references,
    condition_summary,
)
from assets_app.exceptions import InvalidAssetExpression
from task_sdk.definitions import AssetAliasUniqueKey, AssetNameRef, AssetUniqueKey, AssetUriRef

A = {"asset": {"name": "a", "uri": "s3://b/a"}}
B = {"asset": {"name": "b", "uri": "s3://b/b"}}
C = {"asset": {"name": "c", "uri": "s3://b/c"}}
RESOLUTION = Resolution(
    asset_ids={
        AssetUniqueKey("a", "s3://b/a"): 1,
        AssetUniqueKey("b", "s3://b/b"): 2,
        AssetUniqueKey("c", "s3://b/c"): 3,
    },
    alias_asset_ids={"alias-ab": {1, 2}, "alias-empty": set()},
    name_ref_ids={"a": 1},
    uri_ref_ids={"s3://b/b": 2},
)


def met(expression: dict, ready: set[int]) -> bool:
    return condition_is_met(
        condition_parse(expression), resolution=RESOLUTION, ready_asset_ids=ready
    )


def test_parse_builds_the_tree():
    # given
    expression = {
        "all": [
            A,
            {"any": [{"alias": {"name": "x"}}, {"asset_ref": {"name": "n"}}]},
            {"asset_ref": {"uri": "s3://v/u"}},
        ]
    }

    # when
    condition = condition_parse(expression)

    # then
    assert condition == AllOf(
        (
            AssetUniqueKey("a", "s3://b/a"),
            AnyOf((AssetAliasUniqueKey("x"), AssetNameRef("n"))),
            AssetUriRef("s3://v/u"),
        )
    )
    assert condition_references(condition) == ConditionReferences(
        asset_keys=(AssetUniqueKey("a", "s3://b/a"),),
        alias_names=("x",),
        name_refs=("n",),
        uri_refs=("s3://v/u",),
    )


@pytest.mark.parametrize(
    "expression",
    [
        pytest.param(None, id="null"),
        pytest.param([None], id="list-holding-null"),
        pytest.param({"asset": {"name": "a"}, "alias": {"name": "x"}}, id="two-keys"),
        pytest.param({"asset": {}}, id="asset-without-name"),
        pytest.param({"all": A}, id="all-not-a-list"),
        pytest.param({"asset_ref": {"name": "a", "uri": "u"}}, id="ref-with-both"),
        pytest.param({"asset_ref": {}}, id="ref-with-neither"),
        pytest.param({"dataset": {"uri": "u"}}, id="unknown-kind"),
        pytest.param({"any": [{"alias": {"name": ""}}]}, id="nested-empty-name"),
    ],
)
def test_parse_rejects_malformed_expressions(expression):
    with pytest.raises(InvalidAssetExpression):
        condition_parse(expression)


@pytest.mark.parametrize(
    ("expression", "ready", "expected"),
    [
        pytest.param(A, {1}, True, id="asset-ready"),
        pytest.param(A, {2}, False, id="asset-not-ready"),
        pytest.param({"all": [A, B]}, {1}, False, id="all-one-of-two"),
        pytest.param({"all": [A, B]}, {1, 2}, True, id="all-both"),
        pytest.param({"any": [A, B]}, {2}, True, id="any-one"),
        pytest.param({"any": [A, B]}, set(), False, id="any-none"),
        pytest.param({"all": [{"any": [A, B]}, C]}, {2, 3}, True, id="nested-met"),
        pytest.param({"all": [{"any": [A, B]}, C]}, {1, 2}, False, id="nested-unmet"),
        pytest.param({"any": [{"all": [A, B]}, C]}, {1, 2}, True, id="nested-any-of-all"),
        pytest.param({"alias": {"name": "alias-ab"}}, {2}, True, id="alias-resolved-ready"),
        pytest.param({"alias": {"name": "alias-ab"}}, {3}, False, id="alias-resolved-unready"),
        pytest.param({"alias": {"name": "alias-empty"}}, {1, 2, 3}, False, id="alias-empty"),
        pytest.param({"alias": {"name": "unknown"}}, {1, 2, 3}, False, id="alias-unknown"),
        pytest.param({"asset_ref": {"name": "a"}}, {1}, True, id="name-ref"),
        pytest.param({"asset_ref": {"uri": "s3://b/b"}}, {2}, True, id="uri-ref"),
        pytest.param({"asset_ref": {"name": "zzz"}}, {1, 2, 3}, False, id="ref-unresolved"),
        pytest.param({"asset": {"name": "d", "uri": "d"}}, {1, 2, 3}, False, id="asset-unknown"),
        # Airflow's all() / any() of nothing; a DAG on nothing alone is never queued anyway
        pytest.param({"all": []}, set(), True, id="empty-all"),
        pytest.param({"any": []}, {1}, False, id="empty-any"),
        pytest.param({"all": [{"all": []}, A]}, {1}, True, id="empty-all-in-all"),
        pytest.param({"all": [{"any": []}, A]}, {1}, False, id="empty-any-in-all"),
        pytest.param({"any": [{"any": []}, A]}, {1}, True, id="empty-any-in-any"),
        pytest.param({"any": [{"all": []}, A]}, set(), True, id="empty-all-in-any"),
    ],
)
def test_condition_is_met(expression, ready, expected):
    assert met(expression, ready) is expected


def test_resolution_lists_every_asset_it_knows():
    assert RESOLUTION.all_asset_ids() == {1, 2, 3}


def test_resolution_tells_direct_assets_from_alias_targets():
    resolution = Resolution(
        asset_ids={("a", "s3://b/a"): 1},
        alias_asset_ids={"al": {1, 4}},
        name_ref_ids={"b": 2},
        uri_ref_ids={"s3://b/c": 3},
    )

    assert resolution.direct_asset_ids() == {1, 2, 3}
    assert resolution.all_asset_ids() == {1, 2, 3, 4}


def test_references_of_several_conditions_are_their_union_in_order_mentioned():
    # given: two DAGs' conditions sharing an asset
    first = condition_parse({"all": [A, {"alias": {"name": "x"}}]})
    second = condition_parse({"any": [A, B, {"asset_ref": {"uri": "s3://v/u"}}]})

    # when
    references = condition_references(first, second)

    # then: also when made from each condition's own references (what the scheduler
    # remembers per DAG)
    assert (
        references
        == ConditionReferences.union([condition_references(first), condition_references(second)])
        == ConditionReferences(
            asset_keys=(AssetUniqueKey("a", "s3://b/a"), AssetUniqueKey("b", "s3://b/b")),
            alias_names=("x",),
            uri_refs=("s3://v/u",),
        )
    )
    assert ConditionReferences.union([]) == ConditionReferences()


@pytest.mark.parametrize(
    ("expression", "summary"),
    [
        pytest.param(A, "a", id="asset"),
        pytest.param({"alias": {"name": "x"}}, "alias:x", id="alias"),
        pytest.param({"asset_ref": {"name": "n"}}, "name-ref:n", id="name-ref"),
        pytest.param({"asset_ref": {"uri": "s3://v/u"}}, "uri-ref:s3://v/u", id="uri-ref"),
        pytest.param(
            {"all": [A, {"any": [B, {"alias": {"name": "x"}}]}]}, "a & (b | alias:x)", id="nested"
        ),
        pytest.param({"any": [{"all": [A, B]}, C]}, "(a & b) | c", id="any-of-all"),
    ],
)
def test_stored_form_round_trips_and_summarises(expression: dict, summary: str):
    # when
    condition = condition_parse(expression)

    # then
    assert condition_expression(condition) == expression
    assert condition_parse(condition_expression(condition)) == condition
    assert condition_summary(condition) == summary
