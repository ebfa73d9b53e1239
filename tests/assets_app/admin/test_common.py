"""assets_app.admin.common: every page renders, permissions of the read-only tables, helpers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse

from assets_app.admin.common import (
    asset_link,
    duration,
    fact,
    ident,
    pretty_json,
    state_badge,
    when,
)
from assets_app.formats import duration_human, timestamp_human
from tests.assets_app.admin import ADMIN_MODELS, change, changelist
from tests.factories import AssetFactory

pytestmark = pytest.mark.django_db

#: the tables an operator edits in the admin; every other list is written by the system
EDITABLE_MODELS = ("asset", "assetalias", "assetaliasasset")


@pytest.mark.parametrize("model", ADMIN_MODELS)
def test_changelist_renders(admin_client, world, model):
    response = admin_client.get(changelist(model))
    assert response.status_code == 200


@pytest.mark.parametrize("model", ADMIN_MODELS)
def test_change_page_renders(admin_client, world, model):
    response = admin_client.get(change(model, world[model].pk))
    assert response.status_code == 200


@pytest.mark.parametrize("model", EDITABLE_MODELS)
def test_add_page_renders_for_editable_tables(admin_client, model):
    assert admin_client.get(reverse(f"admin:assets_app_{model}_add")).status_code == 200


@pytest.mark.parametrize(
    "model",
    [m for m in ADMIN_MODELS if m not in EDITABLE_MODELS],
)
def test_system_written_tables_cannot_be_added(admin_client, model):
    assert admin_client.get(reverse(f"admin:assets_app_{model}_add")).status_code == 403


def test_login_is_required(client):
    response = client.get(changelist("assetevent"))
    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        pytest.param(timedelta(seconds=-5), "0 s", id="negative"),
        pytest.param(0.44, "0.4 s", id="under a second"),
        pytest.param(1.94, "1.9 s", id="seconds with a tenth"),
        pytest.param(9.96, "10 s", id="rounds up to ten"),
        pytest.param(42.4, "42 s", id="whole seconds"),
        pytest.param(timedelta(seconds=160), "2 m 40 s", id="minutes"),
        pytest.param(timedelta(seconds=3599.7), "1 h 00 m", id="rounds up to an hour"),
        pytest.param(timedelta(hours=2, minutes=3, seconds=4), "2 h 03 m", id="hours"),
        pytest.param(timedelta(days=1, hours=2, minutes=3, seconds=4), "1 d 2 h", id="days"),
        pytest.param(None, "-", id="none"),
    ],
)
def test_duration_reads_as_a_person_says_it(value, shown):
    assert duration_human(value) == shown


def test_duration_cell_keeps_one_line():
    assert duration(2.78019) == '<span class="ar-duration">2.8 s</span>'
    assert duration(None) == "-"


def test_one_timestamp_format_whatever_the_precision_or_zone():
    aware = datetime(2026, 12, 1, 19, 25, 28, 244731, tzinfo=UTC)
    assert timestamp_human(aware) == "2026-12-01 19:25:28 UTC"
    assert timestamp_human(aware.astimezone(__import__("zoneinfo").ZoneInfo("Europe/Paris"))) == (
        "2026-12-01 19:25:28 UTC"
    )
    assert timestamp_human(aware.replace(tzinfo=None)) == "2026-12-01 19:25:28 UTC"
    assert timestamp_human(None) == "-"
    assert when(aware) == (
        '<time class="ar-when" datetime="2026-12-01T19:25:28.244731+00:00">'
        '<span class="ar-idp">2026-12-01</span> <span class="ar-idp">19:25:28 UTC</span></time>'
    )


@pytest.mark.parametrize(
    ("value", "html"),
    [
        pytest.param(
            "asset_triggered__2026-12-01T19:25:28.244731+00:00_AbC12xYz",
            ["asset_triggered__", "2026-12-01T19:25:28.244731+00:00_AbC12xYz"],
            id="run id: never inside its timestamp",
        ),
        pytest.param(
            "scheduled__2026-12-01T19:25:28+00:00",
            ["scheduled__", "2026-12-01T19:25:28+00:00"],
            id="scheduled run id",
        ),
        pytest.param(
            "manual__2026-12-01T19:25:28.5+00:00_x",
            ["manual__", "2026-12-01T19:25:28.5+00:00_x"],
            id="no break inside the time's fraction",
        ),
        pytest.param(
            "warehouse_orders_daily_export_to_s3_and_customer_dimension_refresh",
            ["warehouse_orders_daily_export_to_", "s3_and_customer_dimension_refresh"],
            id="a long DAG id: cut nearest its middle",
        ),
        pytest.param("s3://bucket/my-task", ["s3://bucket/", "my-task"], id="uri"),
        pytest.param("x" * 81 + "_a_b", ["x" * 81 + "_", "a_", "b"], id="past 80: every place"),
        pytest.param("v1.2.3", ["v1.2.3"], id="a version stays whole"),
        pytest.param("daily-exports", ["daily-", "exports"], id="a hyphen between words"),
        pytest.param("a<b>_c", ["a&lt;b&gt;_", "c"], id="escaped"),
    ],
)
def test_ident_wraps_only_between_parts(value, html):
    parts = "<wbr>".join(f'<span class="ar-idp">{part}</span>' for part in html)
    assert ident(value) == f'<span class="ar-id">{parts}</span>'


def test_states_are_badges_coloured_by_meaning():
    assert state_badge("success") == (
        '<span class="ar-badge ar-badge-good ar-state-is-success">success</span>'
    )
    assert "ar-badge-bad" in state_badge("upstream_failed")
    assert ">upstream failed<" in state_badge("upstream_failed")
    assert "ar-badge-active" in state_badge("running")
    assert "ar-badge-waiting" in state_badge("up_for_retry")
    assert "no state" in state_badge(None)


def test_facts_are_red_only_when_wrong():
    assert fact("paused") == '<span class="ar-fact">paused</span>'
    assert fact("failed", wrong=True) == '<span class="ar-fact ar-fact-wrong">failed</span>'


def test_asset_link_names_a_deleted_asset_by_id():
    # given
    asset = AssetFactory(name="a<b")

    # then
    assert asset_link(None, 42) == "deleted asset #42"
    assert asset_link(None, None) == "-"
    assert asset_link(asset, asset.pk) == (
        f'<a href="{change("asset", asset.pk)}"><span class="ar-id">'
        '<span class="ar-idp">a&lt;b</span></span></a>'  # escaped
    )


def test_pretty_json_is_sorted_indented_and_escaped():
    assert pretty_json({"b": "<x>", "a": 1}) == (
        '<pre style="margin:0; white-space:pre-wrap">'
        "{\n  &quot;a&quot;: 1,\n  &quot;b&quot;: &quot;&lt;x&gt;&quot;\n}</pre>"
    )
