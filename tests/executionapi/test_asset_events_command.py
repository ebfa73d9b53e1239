"""``manage.py asset_events``: the newest events as a table, or as JSON lines in the execution
API's asset-event item shape."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from assets_app.models import AssetAliasAssetEvent, AssetEvent, DagRunAssetEvent
from tests.executionapi.conftest import ASSET_EVENT_ITEM_KEYS
from tests.factories import AssetAliasFactory, AssetEventFactory, AssetFactory, DagRunFactory

pytestmark = pytest.mark.django_db


def run(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("asset_events", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.fixture
def events():
    """Three events, oldest first: one through an alias and consumed by a run, one manual."""
    now = timezone.now()
    asset = AssetFactory(name="a", uri="s3://b/a")
    other = AssetFactory(name="o", uri="s3://b/o")
    alias = AssetAliasFactory(name="al")
    first = AssetEventFactory(asset=asset, source_dag_id="p", timestamp=now - timedelta(hours=2))
    second = AssetEventFactory(
        asset=other, source_dag_id="q", extra={"k": "v"}, timestamp=now - timedelta(hours=1)
    )
    AssetAliasAssetEvent.objects.create(alias=alias, event=second)
    DagRunAssetEvent.objects.create(dag_run=DagRunFactory(run_id="consumer_run"), event=second)
    third = AssetEvent.objects.create(asset=asset, timestamp=now)
    return first, second, third


def test_asset_events_table_is_newest_first(events):
    first, second, third = events

    # when
    out, _ = run()

    # then
    lines = out.splitlines()
    assert lines[0].split() == [
        "ID",
        "TIMESTAMP",
        "ASSET",
        "SOURCE",
        "ALIASES",
        "PARTITION",
        "EXTRA",
    ]
    assert [line.split()[0] for line in lines[1:]] == [str(third.pk), str(second.pk), str(first.pk)]
    assert "manual" in lines[1]
    assert "al" in lines[2]
    assert '{"k": "v"}' in lines[2]
    assert "q.task @ run" in lines[2]


def test_asset_events_json_lines_have_the_api_item_shape(events):
    _, second, third = events

    # when
    out, _ = run("--json", "--limit", "2")

    # then
    items = [json.loads(line) for line in out.splitlines()]
    assert [item["id"] for item in items] == [third.pk, second.pk]
    assert set(items[1]) == ASSET_EVENT_ITEM_KEYS
    assert items[1]["asset"] == {"name": "o", "uri": "s3://b/o", "group": "", "extra": {}}
    assert [run_["run_id"] for run_ in items[1]["created_dagruns"]] == ["consumer_run"]
    assert items[0]["source_dag_id"] is None


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param(["--name=a"], [2, 0], id="name"),
        pytest.param(["--uri=s3://b/o"], [1], id="uri"),
        pytest.param(["--alias=al"], [1], id="alias"),
        pytest.param(["--dag=p"], [0], id="dag"),
        pytest.param(["--name=a", "--dag=q"], [], id="combined"),
    ],
)
def test_asset_events_filters(events, args, expected):
    # when
    out, _ = run("--json", *args)

    # then
    assert [json.loads(line)["id"] for line in out.splitlines()] == [events[i].pk for i in expected]


@pytest.mark.parametrize("json_lines", [False, True], ids=["table", "json"])
def test_asset_events_loads_only_what_it_prints(events, django_assert_num_queries, json_lines):
    # when / then: the events with their asset, then the table's aliases or the items' runs
    with django_assert_num_queries(2):
        run(*(["--json"] if json_lines else []))


def test_asset_events_of_a_deleted_asset_still_list(events):
    # given
    first = events[0]
    first.asset.delete()

    # when
    out, _ = run()
    json_out, _ = run("--json")

    # then
    assert f"(deleted asset {first.asset_id})" in out
    assert json.loads(json_out.splitlines()[-1])["asset"] is None


def test_asset_events_without_events():
    assert run()[0].strip() == "No asset events."


@pytest.mark.parametrize("limit", ["0", "10001"])
def test_asset_events_rejects_a_bad_limit(limit):
    with pytest.raises(CommandError, match="--limit must be between 1 and 10000"):
        run("--limit", limit)
