"""Bad input is a 4xx naming the field, and nothing is written (issue #10).

JSON that Python parses but no database stores (``NaN``, ``±Infinity``, ``1e400``, lone
surrogates), JSON nested too deep, numbers out of range and oversized extras: on every route
that stores JSON or takes a number. Each body is sent as raw text, as a client would send it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.apps import apps
from django.test import override_settings

from assets_app.models import TaskInstance
from task_sdk.jsonvalues import MAX_JSON_DEPTH
from tests.executionapi.conftest import client_for, state_url

pytestmark = pytest.mark.django_db(transaction=True)

END = "2026-01-01T00:00:00Z"
KEY = '{"name": "a", "uri": "s3://b/a"}'
MANIFEST = """
dags:
  - dag_id: producer
    tasks:
      - task_id: produce
        outlets: [{asset: {name: a, uri: "s3://b/a"}}, {alias: al}]
"""
OUTLETS = (
    '[{"name": "a", "uri": "s3://b/a", "type": "Asset"}, {"name": "al", "type": "AssetAlias"}]'
)


def success(events: str) -> str:
    """A success body with these (raw JSON) outlet events."""
    return (
        f'{{"state": "success", "end_date": "{END}", "task_outlets": {OUTLETS}, '
        f'"outlet_events": [{events}]}}'
    )


def asset_event(extra: str) -> str:
    return f'{{"dest_asset_key": {KEY}, "extra": {extra}}}'


def alias_event(
    *, extra: str = "{}", dest_extra: str = "{}", name: str = '"t"', uri: str = '"s3://b/t"'
) -> str:
    return (
        f'{{"source_alias_name": "al", "dest_asset_key": {{"name": {name}, "uri": {uri}}}, '
        f'"extra": {extra}, "dest_asset_extra": {dest_extra}}}'
    )


def deferred(trigger_kwargs: str = "{}", next_kwargs: str = "{}") -> str:
    return (
        '{"state": "deferred", "classpath": "x.Trigger", "next_method": "resume", '
        f'"trigger_kwargs": {trigger_kwargs}, "next_kwargs": {next_kwargs}}}'
    )


def nested(levels: int, leaf: str = "1") -> str:
    """``levels`` nested lists around ``leaf``, as JSON text."""
    return "[" * levels + leaf + "]" * levels


STATE, RTIF, XCOM = "PATCH state", "PUT rtif", "POST xcom"
EVENT_0 = ["outlet_events", 0]

# (route, raw body, where the 422 points below "body")
CASES = [
    # 1. JSON PostgreSQL's jsonb refuses, on every route that stores JSON
    pytest.param(
        STATE, success(asset_event('{"ratio": NaN}')), [*EVENT_0, "extra", "ratio"], id="extra-nan"
    ),
    pytest.param(
        STATE,
        success(asset_event('{"r": [Infinity]}')),
        [*EVENT_0, "extra", "r", 0],
        id="extra-infinity",
    ),
    pytest.param(
        STATE,
        success(asset_event('{"r": -Infinity}')),
        [*EVENT_0, "extra", "r"],
        id="extra-minus-infinity",
    ),
    pytest.param(
        STATE, success(asset_event('{"r": 1e400}')), [*EVENT_0, "extra", "r"], id="extra-1e400"
    ),
    pytest.param(
        STATE,
        success(asset_event('{"r": "\\ud800"}')),
        [*EVENT_0, "extra", "r"],
        id="extra-surrogate",
    ),
    pytest.param(
        STATE,
        success(asset_event('{"\\udc00": 1}')),
        [*EVENT_0, "extra", "\udc00"],
        id="extra-surrogate-key",
    ),
    pytest.param(
        STATE,
        success(alias_event(extra='{"r": NaN}')),
        [*EVENT_0, "extra", "r"],
        id="alias-extra-nan",
    ),
    pytest.param(
        STATE,
        success(alias_event(dest_extra='{"r": -1e400}')),
        [*EVENT_0, "dest_asset_extra", "r"],
        id="dest-asset-extra",
    ),
    pytest.param(
        STATE,
        success(alias_event(name='"t\\ud800"')),
        [*EVENT_0, "dest_asset_key", "name"],
        id="alias-target-name",
    ),
    pytest.param(
        STATE,
        success(alias_event(uri='"s3://\\udfff"')),
        [*EVENT_0, "dest_asset_key", "uri"],
        id="alias-target-uri",
    ),
    pytest.param(
        STATE, deferred(trigger_kwargs='{"t": NaN}'), ["trigger_kwargs", "t"], id="trigger-kwargs"
    ),
    pytest.param(
        STATE,
        deferred(next_kwargs='{"n": [1, Infinity]}'),
        ["next_kwargs", "n", 1],
        id="next-kwargs",
    ),
    pytest.param(RTIF, '{"cmd": NaN}', ["cmd"], id="rtif-nan"),
    pytest.param(RTIF, '{"cmd": "\\ud83d"}', ["cmd"], id="rtif-surrogate"),
    pytest.param(XCOM, '{"v": [NaN]}', ["v", 0], id="xcom-nan"),
    pytest.param(XCOM, "1e400", [], id="xcom-1e400"),
    pytest.param(XCOM, '"\\udfff"', [], id="xcom-surrogate"),
    # 2. nested deeper than MAX_JSON_DEPTH (the field's 422), or than the parser goes (body)
    pytest.param(
        STATE,
        success(asset_event(f'{{"d": {nested(MAX_JSON_DEPTH)}}}')),
        [*EVENT_0, "extra", "d", *[0] * (MAX_JSON_DEPTH - 1)],
        id="extra-too-deep",
    ),
    pytest.param(
        RTIF,
        f'{{"d": {nested(MAX_JSON_DEPTH)}}}',
        ["d", *[0] * (MAX_JSON_DEPTH - 1)],
        id="rtif-too-deep",
    ),
    pytest.param(XCOM, nested(MAX_JSON_DEPTH + 1), [0] * MAX_JSON_DEPTH, id="xcom-too-deep"),
    pytest.param(
        STATE, success(asset_event(f'{{"d": {nested(100_000)}}}')), [], id="state-1e5-levels"
    ),
    pytest.param(RTIF, f'{{"d": {nested(1000)}}}', [], id="rtif-1000-levels"),
    pytest.param(XCOM, nested(5000), [], id="xcom-5000-levels"),
    # 5. what the schema says: a string is not coerced from a number; a body is required
    pytest.param(
        STATE,
        f'{{"state": "failed", "end_date": "{END}", "rendered_map_index": 0}}',
        ["rendered_map_index"],
        id="rendered-map-index-int",
    ),
    pytest.param(RTIF, "", [], id="rtif-no-body"),
    pytest.param(XCOM, "", [], id="xcom-no-body"),
]


@pytest.fixture
def ti(declare, make_ti) -> TaskInstance:
    declare(MANIFEST)
    return make_ti(dag_id="producer", task_id="produce")


def snapshot() -> dict[str, Any]:
    """Every row of every table of the registry: a failed request must change none."""
    return {
        model.__name__: sorted(map(repr, model.objects.values_list()))
        for model in apps.get_app_config("assets_app").get_models()
    }


def send(ti: TaskInstance, route: str, body: str) -> Any:
    client = client_for(ti)
    if route == STATE:
        return client.patch(state_url(ti), body, content_type="application/json")
    if route == RTIF:
        url = f"/execution/task-instances/{ti.pk}/rtif"
        return client.put(url, body, content_type="application/json")
    url = f"/execution/xcoms/{ti.dag_id}/{ti.run_id}/{ti.task_id}/k"
    return client.post(url, body, content_type="application/json")


@pytest.mark.parametrize(("route", "body", "loc"), CASES)
def test_unstorable_json_is_422_naming_the_field_and_nothing_is_written(ti, route, body, loc):
    before = snapshot()

    response = send(ti, route, body)

    assert response.status_code == 422, response.content
    errors = response.json()["detail"]
    assert [error["loc"] for error in errors] == [["body", *loc]], errors
    assert snapshot() == before


def test_the_messages_say_what_is_wrong(ti):
    def message(body: str) -> tuple[str, str]:
        [error] = send(ti, STATE, success(asset_event(body))).json()["detail"]
        return error["type"], error["msg"]

    assert message('{"r": NaN}') == (
        "finite_number",
        "Input is not storable JSON: NaN is not valid JSON",
    )
    assert message('{"r": 1e400}') == (
        "finite_number",
        "Input is not storable JSON: Infinity is not valid JSON",
    )
    assert message('{"r": "a\\ud800"}') == (
        "string_unicode",
        "Input is not storable JSON: contains the lone surrogate U+D800, which is not valid "
        "Unicode",
    )
    assert message(f'{{"d": {nested(MAX_JSON_DEPTH)}}}') == (
        "too_deep",
        f"Input is not storable JSON: nested deeper than {MAX_JSON_DEPTH} levels",
    )
    [error] = send(ti, XCOM, nested(5000)).json()["detail"]
    assert error == {
        "loc": ["body"],
        "msg": f"JSON decode error: nested deeper than {MAX_JSON_DEPTH} levels",
        "type": "json_invalid",
    }


def test_the_deepest_storable_values_are_stored(ti):
    fits = nested(MAX_JSON_DEPTH - 1)  # inside an object: 64 levels in all
    assert send(ti, RTIF, f'{{"d": {fits}}}').status_code == 201
    assert send(ti, XCOM, nested(MAX_JSON_DEPTH)).status_code == 201
    assert send(ti, STATE, success(asset_event(f'{{"d": {fits}}}'))).status_code == 204
    ti.refresh_from_db()
    assert ti.state == "success"
    assert json.dumps(ti.rendered_fields["d"]) == fits.replace(",", ", ")


# --- 3. numbers out of range --------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "loc"),
    [
        pytest.param("by-asset?name=a&limit=9223372036854775808", "limit", id="by-asset-2**63"),
        pytest.param("by-asset?name=a&limit=99999999999999999999999", "limit", id="by-asset-huge"),
        pytest.param("by-asset-alias?name=al&limit=9223372036854775808", "limit", id="by-alias"),
        pytest.param("by-asset-alias?name=al&limit=0", "limit", id="by-alias-0"),
    ],
)
def test_out_of_range_limit_is_422(ti, query, loc):
    response = client_for(ti).get(f"/execution/asset-events/{query}")

    assert response.status_code == 422, response.content
    assert [e["loc"] for e in response.json()["detail"]] == [["query", loc]]


def test_largest_limit_is_accepted(ti):
    response = client_for(ti).get(
        "/execution/asset-events/by-asset-alias?name=al&limit=9223372036854775807"
    )
    assert response.status_code == 200, response.content
    assert response.json() == {"asset_events": []}


# --- 6. an event's extra is at most ASSET_EVENT_EXTRA_MAX_BYTES -----------------------------


@override_settings(ASSET_EVENT_EXTRA_MAX_BYTES=100)
@pytest.mark.parametrize(
    ("event", "loc"),
    [
        pytest.param(asset_event('{"k": "' + "x" * 93 + '"}'), "extra", id="extra"),
        pytest.param(alias_event(extra='{"k": "' + "é" * 46 + 'x"}'), "extra", id="alias-extra"),
        pytest.param(
            alias_event(dest_extra='{"k":"' + "x" * 93 + '"}'), "dest_asset_extra", id="dest"
        ),
    ],
)
def test_extra_over_the_limit_is_422_naming_the_event(ti, event, loc):
    before = snapshot()
    small = asset_event('{"k": "' + "x" * 92 + '"}')  # {"k":"xx…"} is exactly 100 bytes

    response = send(ti, STATE, success(f"{small}, {event}"))

    assert response.status_code == 422, response.content
    [error] = response.json()["detail"]
    assert error["loc"] == ["body", "outlet_events", 1, loc]
    assert error["type"] == "too_large"
    assert error["msg"] == "Input is 101 bytes as JSON, more than the 100 accepted"
    assert snapshot() == before
