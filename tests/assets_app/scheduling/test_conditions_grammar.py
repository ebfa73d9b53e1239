"""One grammar of asset conditions, two entry points: a manifest's ``schedule``
(``manifest_parse``, what ``declare_dags`` and the DAG processor read) and a stored
``Dag.asset_expression`` (``condition_parse``, what the scheduler, the admin and the APIs
read). Every edge case goes through both, at the top of the schedule and nested in an ``any``;
they must accept the same condition, or refuse it with the same message naming the same
place: ``dags.yaml: DAG 'd', schedule…`` for the manifest (as its other errors name a DAG and a
field), ``asset_expression…`` for the stored form. What they accept is stored in a form that
reads back as the same condition.

No test here touches the database.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from assets_app.conditions import (
    AllOf,
    AnyOf,
    Condition,
    condition_expression,
    condition_parse,
)
from assets_app.exceptions import InvalidAssetExpression, ManifestError
from assets_app.services.dags.manifest import AliasDecl, AssetDecl, manifest_parse
from task_sdk.definitions import AssetAliasUniqueKey, AssetNameRef, AssetUniqueKey, AssetUriRef

A = {"asset": {"name": "a", "uri": "s3://b/a"}}
X = {"alias": {"name": "x"}}
KEY_A = AssetUniqueKey(name="a", uri="s3://b/a")
KEY_X = AssetAliasUniqueKey(name="x")

SOURCE = "dags.yaml"
#: Where each entry point's messages start: the manifest names the DAG and the field.
MANIFEST_PLACE = f"{SOURCE}: DAG 'd', schedule"
STORED_PLACE = "asset_expression"


@dataclass(frozen=True)
class Refused:
    """A refusal: the place below the condition's own (``.any[1].asset``) and what the
    message says there."""

    place: str
    reason: str


ACCEPTED = [
    # Airflow's AssetAll() / AssetAny() / schedule=[]: accepted, stored {"all": []} / {"any": []}
    pytest.param({"all": []}, AllOf(()), id="empty-all"),
    pytest.param({"any": []}, AnyOf(()), id="empty-any"),
    pytest.param([], AllOf(()), id="empty-list"),
    pytest.param(
        {"any": [{"all": []}, {"any": []}, A]},
        AnyOf((AllOf(()), AnyOf(()), KEY_A)),
        id="empties-inside",
    ),
    # a tree is kept as written: no folding of one child, of nesting or of repeats
    pytest.param({"all": [A]}, AllOf((KEY_A,)), id="single-all"),
    pytest.param({"any": [X]}, AnyOf((KEY_X,)), id="single-any"),
    pytest.param(
        {"all": [{"any": [{"all": [A]}, X]}]},
        AllOf((AnyOf((AllOf((KEY_A,)), KEY_X)),)),
        id="all-in-any-in-all",
    ),
    pytest.param({"all": [A, A]}, AllOf((KEY_A, KEY_A)), id="duplicate-leaves"),
    pytest.param(
        {"any": [{"alias": "x"}, X]}, AnyOf((KEY_X, KEY_X)), id="duplicate-alias-spelt-twice"
    ),
    pytest.param(
        {"any": [{"all": [A]}, {"all": [A]}]},
        AnyOf((AllOf((KEY_A,)), AllOf((KEY_A,)))),
        id="duplicate-subtrees",
    ),
    # a list is all of, at any depth
    pytest.param([A, X], AllOf((KEY_A, KEY_X)), id="list"),
    pytest.param({"any": [[A, X]]}, AnyOf((AllOf((KEY_A, KEY_X)),)), id="list-in-any"),
    # leaves as Airflow builds them: a name or uri alone copied, the uri normalized
    pytest.param(
        {"asset": {"uri": "S3://b/x/"}},
        AssetUniqueKey(name="S3://b/x/", uri="s3://b/x"),
        id="asset-by-uri-alone",
    ),
    pytest.param({"asset": {"name": "a"}}, AssetUniqueKey(name="a", uri="a"), id="asset-by-name"),
    pytest.param(
        {"asset": {"name": "a", "uri": "s3://b/a", "group": "g", "extra": {"k": [1]}}},
        KEY_A,
        id="asset-with-group-and-extra",
    ),
    # Airflow's own as_expression() of an asset and an alias (with their group)
    pytest.param(
        {"all": [{"asset": {"uri": "s3://b/a", "name": "a", "group": "asset"}}]},
        AllOf((KEY_A,)),
        id="airflow-asset-expression",
    ),
    pytest.param({"alias": {"name": "x", "group": "asset"}}, KEY_X, id="airflow-alias-expression"),
    pytest.param({"asset_ref": {"name": "n"}}, AssetNameRef("n"), id="name-ref"),
    pytest.param({"asset_ref": {"uri": "S3://b/u/"}}, AssetUriRef("s3://b/u"), id="uri-ref"),
]

CONDITION = "expected an asset condition ({asset: ...}, {asset_ref: ...}, {alias: ...}, "
REFUSED = [
    pytest.param({"dataset": {"uri": "u"}}, Refused("", CONDITION), id="unknown-node"),
    pytest.param({"all": [A], "any": [A]}, Refused("", CONDITION), id="two-operators"),
    pytest.param({}, Refused("", CONDITION), id="empty-mapping"),
    pytest.param({"all": ["a"]}, Refused(".all[0]", CONDITION), id="string-node"),
    pytest.param({"any": [1]}, Refused(".any[0]", CONDITION), id="number-node"),
    pytest.param({"all": [True]}, Refused(".all[0]", CONDITION), id="boolean-node"),
    pytest.param([None], Refused("[0]", CONDITION), id="null-node"),
    pytest.param({"all": A}, Refused(".all", "expected a list of conditions"), id="all-of-a-leaf"),
    pytest.param({"any": None}, Refused(".any", "expected a list of conditions"), id="any-of-null"),
    pytest.param(
        {"asset": {"name": "a", "colour": "red"}},
        Refused(".asset", "unknown key(s) colour (allowed: extra, group, name, uri)"),
        id="unknown-asset-key",
    ),
    pytest.param(
        {"alias": {"name": "x", "colour": "red"}},
        Refused(".alias", "unknown key(s) colour (allowed: group, name)"),
        id="unknown-alias-key",
    ),
    pytest.param(
        {"asset_ref": {"name": "n", "colour": "red"}},
        Refused(".asset_ref", "unknown key(s) colour (allowed: name, uri)"),
        id="unknown-ref-key",
    ),
    pytest.param({"asset": "a"}, Refused(".asset", "expected a mapping"), id="asset-not-a-mapping"),
    pytest.param(
        {"asset": {}}, Refused(".asset", "an asset needs a name or a uri"), id="empty-asset"
    ),
    # (an asset's key is remembered per name, uri and group: a name that cannot be a key of
    # that memory, or can but is no string, is refused all the same, each time)
    pytest.param(
        {"asset": {"name": ["a"]}},
        Refused(".asset", "Asset name must be a string"),
        id="asset-name-a-list",
    ),
    pytest.param(
        {"asset": {"name": 5}}, Refused(".asset", "Asset name must be a string"), id="name-a-number"
    ),
    pytest.param(
        {"asset": {"name": "a", "extra": []}},
        Refused(".asset", "extra must be a mapping"),
        id="extra-not-a-mapping",
    ),
    pytest.param(
        {"asset_ref": {"name": "n", "uri": "s3://b/n"}},
        Refused(".asset_ref", "an asset_ref takes exactly one of name or uri"),
        id="ref-with-both",
    ),
    pytest.param(
        {"asset_ref": {}},
        Refused(".asset_ref", "an asset_ref takes exactly one of name or uri"),
        id="ref-with-neither",
    ),
    pytest.param({"alias": ""}, Refused(".alias", "cannot be empty"), id="alias-empty-name"),
    pytest.param(
        {"alias": {"group": "g"}},
        Refused(".alias", "missing required key(s) name"),
        id="alias-without-name",
    ),
    pytest.param(
        {"any": [A, {"all": [{"asset": {"name": " "}}]}]},
        Refused(".any[1].all[0].asset", "cannot be just whitespace"),
        id="deep-bad-leaf",
    ),
]

PLACEMENTS = [
    pytest.param(lambda node: node, "", id="top"),
    pytest.param(lambda node: {"any": [node]}, ".any[0]", id="nested"),
]


def through_the_manifest(node: Any) -> Condition | str:
    """The schedule a one-DAG manifest declares, or its error message."""
    try:
        manifest = manifest_parse({"dags": [{"dag_id": "d", "schedule": node}]}, source=SOURCE)
    except ManifestError as exc:
        return exc.message
    schedule = manifest.dags[0].schedule
    assert schedule is not None
    return schedule


def as_stored(node: Any) -> Condition | str:
    """The condition a stored expression reads as, or the error message."""
    try:
        return condition_parse(node)
    except InvalidAssetExpression as exc:
        return exc.message


def nested(condition: Condition, below: str) -> Condition:
    return AnyOf((condition,)) if below else condition


@pytest.mark.parametrize(("wrap", "below"), PLACEMENTS)
@pytest.mark.parametrize(("node", "expected"), ACCEPTED)
def test_both_entry_points_accept_the_same_condition(wrap, below, node, expected):
    # when
    declared = through_the_manifest(wrap(node))
    stored = as_stored(wrap(node))

    # then
    assert declared == stored == nested(expected, below)
    # and what the manifest declares is stored in a form that reads back the same
    assert not isinstance(declared, str)
    assert condition_parse(condition_expression(declared)) == declared


@pytest.mark.parametrize(("wrap", "below"), PLACEMENTS)
@pytest.mark.parametrize(("node", "refused"), REFUSED)
def test_both_entry_points_refuse_the_same_condition_naming_the_place(wrap, below, node, refused):
    # when
    declared = through_the_manifest(wrap(node))
    stored = as_stored(wrap(node))

    # then both refuse, naming the same place below the condition's own
    assert isinstance(declared, str)
    assert isinstance(stored, str)
    manifest_prefix = f"{MANIFEST_PLACE}{below}{refused.place}: "
    stored_prefix = f"{STORED_PLACE}{below}{refused.place}: "
    assert declared.startswith(manifest_prefix), declared
    assert stored.startswith(stored_prefix), stored
    # with the same reason (at the top of a schedule, the manifest adds the time schedules)
    stored_reason = stored.removeprefix(stored_prefix)
    assert refused.reason in stored_reason
    assert declared.removeprefix(manifest_prefix).startswith(stored_reason)


def test_a_schedule_that_is_neither_a_condition_nor_a_time_says_both():
    declared = through_the_manifest({"cron": "@daily"})

    assert isinstance(declared, str)
    assert declared.startswith(f"{MANIFEST_PLACE}: {CONDITION}")
    assert "or a time schedule: a cron string or preset" in declared


def test_the_leaves_of_a_condition_declare_their_assets_and_aliases_in_order():
    # given a condition naming an asset twice (once with its group), an alias and a ref
    schedule = {
        "any": [
            {"all": []},
            [{"asset": {"name": "a", "uri": "s3://b/a", "group": "g"}}, {"alias": "x"}],
            A,
            {"asset_ref": {"name": "n"}},
        ]
    }

    # when
    manifest = manifest_parse({"dags": [{"dag_id": "d", "schedule": schedule}]})

    # then
    assert manifest.assets == {KEY_A: AssetDecl(key=KEY_A, group="g")}
    assert manifest.aliases == {"x": AliasDecl(name="x")}
