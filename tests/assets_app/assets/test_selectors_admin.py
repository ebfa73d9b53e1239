"""The admin's reads in assets_app.selectors.assets: the event search (an asset's DAG references
are drawn by assets_app.admin.panels, tested in tests/assets_app/admin/test_panels.py)."""

from __future__ import annotations

import pytest

from assets_app.models import AssetEvent
from assets_app.selectors import assets as selectors
from assets_app.selectors.assets import asset_events_search, search_words
from tests.factories import AssetEventFactory, AssetFactory


@pytest.mark.parametrize(
    ("term", "words"),
    [
        pytest.param("", [], id="empty"),
        pytest.param("   ", [], id="blank"),
        pytest.param("a  b", ["a", "b"], id="words"),
        pytest.param('"s3://lake/a b" c', ["s3://lake/a b", "c"], id="double-quoted"),
        pytest.param("'x y'", ["x y"], id="single-quoted"),
        pytest.param('"open', ['"open'], id="unbalanced-quote"),
    ],
)
def test_search_words_split_like_the_admin(term, words):
    assert search_words(term) == words


@pytest.mark.django_db
def test_event_search_reads_the_matching_asset_ids_first(django_assert_num_queries):
    # given
    hit = AssetEventFactory(asset=AssetFactory(name="orders", uri="s3://b/orders"))
    AssetEventFactory(asset=AssetFactory(name="other", uri="s3://b/other"))
    by_dag = AssetEventFactory(source_dag_id="ORDERS")

    # when the plan is made: one query per word, for the asset ids
    with django_assert_num_queries(1):
        events = asset_events_search(events=AssetEvent.objects.all(), term="orders")

    # then the event query filters by those ids (a literal list), or the DAG / run id
    assert f'"asset_id" IN ({hit.asset_id})' in str(events.query)
    assert set(events) == {hit, by_dag}


@pytest.mark.django_db
def test_event_search_keeps_many_matching_assets_as_a_subquery(monkeypatch):
    # given more matching assets than an id list may hold
    monkeypatch.setattr(selectors, "SEARCH_MAX_ASSET_IDS", 1)
    first = AssetEventFactory(asset=AssetFactory(name="lake-a"))
    second = AssetEventFactory(asset=AssetFactory(name="lake-b"))
    AssetEventFactory(asset=AssetFactory(name="sea"))

    # when
    events = asset_events_search(events=AssetEvent.objects.all(), term="LAKE")

    # then
    assert '"asset_id" IN (SELECT' in str(events.query)
    assert set(events) == {first, second}
