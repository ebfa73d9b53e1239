"""assets_app.admin.assets: assets, aliases and the alias → asset links."""

from __future__ import annotations

import pytest

from assets_app.models import AssetAliasAsset
from tests.assets_app.admin import (
    assert_query_count_does_not_grow,
    change,
    changelist,
    listed,
    page_text,
)
from tests.factories import AssetAliasFactory, AssetEventFactory, AssetFactory

pytestmark = pytest.mark.django_db


def test_asset_page_shows_active_flag_aliases_and_latest_events(admin_client, world):
    # when
    content = admin_client.get(change("asset", world["asset"].pk)).content.decode()
    listing = page_text(admin_client, changelist("asset"))

    # then
    assert "example-alias" in content
    assert change("assetevent", world["assetevent"].pk) in content
    assert "produce_asset_events" in content
    assert "?dag_id=asset_s3_bucket_producer&amp;task_id=produce_asset_events" in content
    assert '<span class="ar-fact">active</span>' in listing  # a fact, not a ✓ or a red ✗
    assert "icon-no" not in listing
    assert "icon-yes" not in listing
    assert "example-alias" in listing


def test_asset_page_draws_the_dags_declaring_it(admin_client, world):
    content = admin_client.get(change("asset", world["asset"].pk)).content.decode()
    lineage = content[content.index('<svg class="ar-lineage ar-flow-') :]
    for dag_id in ("asset_s3_bucket_consumer", "asset_s3_bucket_producer"):
        assert dag_id in lineage, dag_id


def test_asset_name_and_uri_are_fixed_once_saved(admin_client, world):
    form = admin_client.get(change("asset", world["asset"].pk)).context["adminform"].form
    assert "name" not in form.fields
    assert "uri" not in form.fields


@pytest.mark.parametrize(
    ("model", "params", "expected"),
    [
        pytest.param("asset", {"active": "no"}, [], id="asset-inactive"),
        pytest.param("asset", {"active": "yes", "q": "bucket/my"}, ["asset"], id="asset-search"),
        pytest.param("assetalias", {"q": "example"}, ["assetalias"], id="alias-search"),
        pytest.param("assetaliasasset", {"q": "example"}, ["assetaliasasset"], id="mapping-search"),
    ],
)
def test_search_and_filters(admin_client, world, model, params, expected):
    assert listed(admin_client, model, params) == {world[name].pk for name in expected}


def test_asset_alias_mapping_changelist_lists_links(admin_client, world):
    content = page_text(admin_client, changelist("assetaliasasset"))
    assert "example-alias" in content
    assert "s3://bucket/my-task" in content


def test_alias_list_counts_its_assets(admin_client, world):
    # given a second asset linked to the alias
    AssetAliasAsset.objects.create(alias=world["assetalias"], asset=AssetFactory())

    # when
    response = admin_client.get(changelist("assetalias"))

    # then
    (alias,) = response.context["cl"].result_list
    assert alias.linked_assets == 2
    assert '<td class="field-asset_count">2</td>' in response.content.decode()


def _assets_with_events(count: int) -> None:
    alias = AssetAliasFactory()
    for _ in range(count):
        asset = AssetFactory()
        AssetEventFactory(asset=asset)
        AssetAliasAsset.objects.create(alias=alias, asset=asset)


def test_asset_changelist_query_count_does_not_grow_with_rows(admin_client):
    assert_query_count_does_not_grow(admin_client, "asset", _assets_with_events)
