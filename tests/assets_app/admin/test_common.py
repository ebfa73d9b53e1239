"""assets_app.admin.common: every page renders, permissions of the read-only tables, helpers."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse

from assets_app.admin.common import asset_link, duration, pretty_json
from tests.assets_app.admin import ADMIN_MODELS, change, changelist
from tests.factories import AssetFactory

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("model", ADMIN_MODELS)
def test_changelist_renders(admin_client, world, model):
    response = admin_client.get(changelist(model))
    assert response.status_code == 200


@pytest.mark.parametrize("model", ADMIN_MODELS)
def test_change_page_renders(admin_client, world, model):
    response = admin_client.get(change(model, world[model].pk))
    assert response.status_code == 200


@pytest.mark.parametrize("model", ["asset", "assetalias", "assetaliasasset"])
def test_add_page_renders_for_editable_tables(admin_client, model):
    assert admin_client.get(reverse(f"admin:assets_app_{model}_add")).status_code == 200


@pytest.mark.parametrize(
    "model",
    ["assetevent", "assetaliasassetevent", "dag", "dagrun", "taskinstance", "assetdagrunqueue"],
)
def test_system_written_tables_cannot_be_added(admin_client, model):
    assert admin_client.get(reverse(f"admin:assets_app_{model}_add")).status_code == 403


def test_login_is_required(client):
    response = client.get(changelist("assetevent"))
    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]


@pytest.mark.parametrize(
    ("delta", "shown"),
    [
        pytest.param(timedelta(seconds=-5), "0m 00s", id="negative"),
        pytest.param(timedelta(seconds=65), "1m 05s", id="minutes"),
        pytest.param(timedelta(hours=2, minutes=3, seconds=4), "2h 03m 04s", id="hours"),
        pytest.param(timedelta(days=1, hours=2, minutes=3, seconds=4), "1d 02h 03m", id="days"),
    ],
)
def test_duration(delta, shown):
    assert duration(delta) == shown


def test_asset_link_names_a_deleted_asset_by_id():
    # given
    asset = AssetFactory(name="a<b")

    # then
    assert asset_link(None, 42) == "deleted asset #42"
    assert asset_link(None, None) == "-"
    assert asset_link(asset, asset.pk) == (
        f'<a href="{change("asset", asset.pk)}">a&lt;b</a>'  # escaped
    )


def test_pretty_json_is_sorted_indented_and_escaped():
    assert pretty_json({"b": "<x>", "a": 1}) == (
        '<pre style="margin:0; white-space:pre-wrap">'
        "{\n  &quot;a&quot;: 1,\n  &quot;b&quot;: &quot;&lt;x&gt;&quot;\n}</pre>"
    )
