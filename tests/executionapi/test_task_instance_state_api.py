"""PATCH /execution/task-instances/{id}/state: payloads, both wire formats, status codes."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import call_command
from django.db import DatabaseError, connection
from django.test.utils import CaptureQueriesContext

from assets_app.models import (
    Asset,
    AssetActive,
    AssetAlias,
    AssetAliasAsset,
    AssetAliasAssetEvent,
    AssetDagRunQueue,
    AssetEvent,
    TaskInstance,
)
from tests.executionapi.conftest import client_for, state_url, wire_sample
from tests.factories import DagFactory, DagRunFactory, TaskInstanceFactory

pytestmark = pytest.mark.django_db

END = "2026-11-30T04:50:58.540508Z"

# --- the seed's two example bodies ------------------------------------------------------------

SEED_ASSET_BODY = (
    '{"state":"success","end_date":"2025-01-22T10:01:24.675957Z","task_outlets":[{"name":'
    '"s3://bucket/my-task","uri":"s3://bucket/my-task"}],"outlet_events":[{"key":{"name":'
    '"s3://bucket/my-task","uri":"s3://bucket/my-task"},"extra":{},"asset_alias_events":[]}],'
    '"asset_type":"Asset"}'
)
SEED_ALIAS_BODY = (
    '{"state":"success","end_date":"2025-01-22T10:05:01.268374Z","task_outlets":[],'
    '"outlet_events":[{"source_alias_name":"example-alias","dest_asset_key":{"name":'
    '"s3://bucket/my-task","uri":"s3://bucket/my-task"},"extra":{}}],"asset_type":"AssetAlias"}'
)


def _send_raw(ti: TaskInstance, body: str):
    return client_for(ti).generic("PATCH", state_url(ti), body, content_type="application/json")


@pytest.fixture
def seed_dags():
    call_command("declare_dags", "examples/dags.yaml", stdout=open("/dev/null", "w"))  # noqa: SIM115


def test_seed_examples_produce_the_seed_db_rows(seed_dags, make_ti):
    # given the seed's example DAGs and one running TI of each producer
    asset_ti = make_ti("asset_s3_bucket_producer", "produce_asset_events")
    alias_ti = make_ti(
        "asset_alias_example_alias_producer", "produce_asset_events_through_asset_alias"
    )

    # when both seed bodies are sent verbatim
    first = _send_raw(asset_ti, SEED_ASSET_BODY)
    second = _send_raw(alias_ti, SEED_ALIAS_BODY)

    # then exactly the seed's "DB level checks" rows exist
    assert (first.status_code, second.status_code) == (204, 204)
    assert first.content == second.content == b""
    asset = Asset.objects.get()
    assert (asset.name, asset.uri) == ("s3://bucket/my-task", "s3://bucket/my-task")
    alias = AssetAlias.objects.get()
    assert alias.name == "example-alias"
    assert list(AssetAliasAsset.objects.values_list("alias_id", "asset_id")) == [
        (alias.pk, asset.pk)
    ]
    by_asset, by_alias = AssetEvent.objects.order_by("id")
    assert (by_asset.asset_id, by_asset.extra) == (asset.pk, {})
    assert (by_asset.source_dag_id, by_asset.source_task_id) == (
        "asset_s3_bucket_producer",
        "produce_asset_events",
    )
    assert by_asset.source_run_id == asset_ti.run_id
    assert by_asset.source_map_index == -1
    assert list(by_asset.source_aliases.all()) == []
    assert (by_alias.asset_id, by_alias.source_dag_id) == (
        asset.pk,
        "asset_alias_example_alias_producer",
    )
    assert list(AssetAliasAssetEvent.objects.values_list("alias_id", "event_id")) == [
        (alias.pk, by_alias.pk)
    ]
    assert set(AssetDagRunQueue.objects.values_list("target_dag_id", flat=True)) == {
        "asset_s3_bucket_consumer",
        "asset_alias_example_alias_consumer",
    }


def test_seed_alias_run_queues_both_consumer_dags(seed_dags, make_ti):
    ti = make_ti("asset_alias_example_alias_producer", "produce_asset_events_through_asset_alias")

    response = _send_raw(ti, SEED_ALIAS_BODY)

    assert response.status_code == 204
    assert sorted(AssetDagRunQueue.objects.values_list("target_dag_id", flat=True)) == [
        "asset_alias_example_alias_consumer",
        "asset_s3_bucket_consumer",
    ]


def test_seed_format_mixed_outlet_kinds(declare, make_ti):
    # given per-profile asset_type, a top-level asset_type, and an accessor with alias events
    declare(
        """
dags:
  - dag_id: producer
    tasks:
      - task_id: produce
        outlets: [{asset: {name: a, uri: "s3://b/a"}}, {alias: declared}]
"""
    )
    ti = make_ti()
    body = {
        "state": "success",
        "end_date": END,
        "asset_type": "Asset",
        "task_outlets": [
            {"name": "a", "uri": "s3://b/a"},
            {"name": "declared", "asset_type": "AssetAlias"},
        ],
        "outlet_events": [
            {
                "key": {"name": "a", "uri": "s3://b/a"},
                "extra": {"x": 1},
                "asset_alias_events": [
                    {
                        "source_alias_name": "undeclared-but-seed",
                        "dest_asset_key": {"name": "new", "uri": "s3://b/new"},
                        "extra": {},
                    }
                ],
            },
            {
                "source_alias_name": "declared",
                "dest_asset_key": {"name": "new2", "uri": "s3://b/new2"},
                "extra": {"y": 2},
            },
        ],
    }

    response = client_for(ti).patch(state_url(ti), body, format="json")

    assert response.status_code == 204, response.content
    events = {(e.asset.name, json.dumps(e.extra)) for e in AssetEvent.objects.all()}
    assert events == {("a", '{"x": 1}'), ("new", "{}"), ("new2", '{"y": 2}')}
    assert set(AssetAlias.objects.values_list("name", flat=True)) == {
        "declared",
        "undeclared-but-seed",
    }


# --- Airflow 3 wire samples -------------------------------------------------------------------

PRODUCER_MANIFEST = """
dags:
  - dag_id: producer
    tasks:
      - task_id: produce
        outlets:
          - asset: {name: asset_one, uri: "s3://bucket/one"}
          - asset: {name: asset_two, uri: "s3://bucket/two"}
          - asset: {name: by_name_asset, uri: "s3://bucket/by-name"}
          - asset: {name: by_uri_asset, uri: "s3://bucket/by-uri"}
          - alias: my_alias
"""


def _events() -> set[tuple[str, str, str | None, tuple[str, ...]]]:
    return {
        (
            event.asset.name,
            json.dumps(event.extra, sort_keys=True),
            event.partition_key,
            tuple(a.name for a in event.source_aliases.all()),
        )
        for event in AssetEvent.objects.select_related("asset")
    }


@pytest.mark.parametrize(
    ("sample", "expected"),
    [
        pytest.param("success_asset", {("asset_one", '{"k": "v"}', None, ())}, id="asset"),
        pytest.param("success_asset_plain", {("asset_one", "{}", None, ())}, id="asset-plain"),
        pytest.param(
            "success_alias", {("dyn_asset", '{"k": "v"}', None, ("my_alias",))}, id="alias"
        ),
        pytest.param(
            "success_mixed",
            {
                ("asset_two", '{"k": "v2"}', None, ()),
                ("dyn_asset", '{"from": "alias"}', None, ("my_alias",)),
            },
            id="mixed",
        ),
        pytest.param(
            "success_name_ref",
            {
                ("by_name_asset", '{"via": "name"}', None, ()),
                ("by_uri_asset", '{"via": "uri"}', None, ()),
            },
            id="refs",
        ),
        pytest.param(
            "success_ref_plain",
            {("by_name_asset", "{}", None, ()), ("by_uri_asset", "{}", None, ())},
            id="refs-plain",
        ),
        pytest.param(
            "success_metadata",
            {
                ("asset_one", '{"k": "meta"}', None, ()),
                ("dyn_asset", '{"k": "meta-alias"}', None, ("my_alias",)),
            },
            id="metadata",
        ),
        pytest.param(
            "success_partitions",
            {
                ("asset_one", '{"k": "v"}', "2026-01-01", ()),
                ("asset_one", '{"k": "v"}', "2026-01-02", ()),
            },
            id="partitions",
        ),
        pytest.param("success_no_outlets", set(), id="no-outlets"),
    ],
)
def test_wire_sample_success_bodies(declare, make_ti, sample, expected):
    # given
    declare(PRODUCER_MANIFEST)
    ti = make_ti()

    # when
    response = client_for(ti).patch(state_url(ti), wire_sample(sample), format="json")

    # then
    assert response.status_code == 204, response.content
    assert response.content == b""
    assert _events() == expected
    ti.refresh_from_db()
    assert ti.state == "success"
    assert ti.end_date == datetime.fromisoformat(wire_sample(sample)["end_date"])
    assert ti.duration == pytest.approx((ti.end_date - ti.start_date).total_seconds())
    if sample in {"success_alias", "success_mixed", "success_metadata"}:
        dyn = Asset.objects.get(name="dyn_asset")
        assert dyn.extra == {"asset_level": "x"}
        assert not AssetActive.objects.filter(asset=dyn).exists()
        assert AssetAliasAsset.objects.filter(asset=dyn, alias__name="my_alias").count() == 1


def test_unknown_declared_asset_is_skipped_and_task_succeeds(declare, make_ti, caplog):
    declare(PRODUCER_MANIFEST)
    ti = make_ti()
    body = {
        "state": "success",
        "end_date": END,
        "task_outlets": [{"name": "nope", "uri": "s3://nope", "type": "Asset"}],
        "outlet_events": [],
    }

    response = client_for(ti).patch(state_url(ti), body, format="json")

    assert response.status_code == 204
    assert not AssetEvent.objects.exists()
    assert "nope" in caplog.text


# --- the state x payload table ------------------------------------------------------------------

STATE_PAYLOADS = [
    pytest.param(wire_sample("success_no_outlets"), id="success"),
    pytest.param(wire_sample("failed_state"), id="failed"),
    pytest.param({"state": "skipped", "end_date": END}, id="skipped"),
    pytest.param({"state": "removed", "end_date": END, "rendered_map_index": "x"}, id="removed"),
    pytest.param({"state": "upstream_failed", "end_date": END}, id="upstream_failed"),
    pytest.param(
        {
            "state": "up_for_retry",
            "end_date": END,
            "rendered_map_index": None,
            "retry_delay_seconds": None,
            "retry_reason": None,
        },
        id="up_for_retry",
    ),
    pytest.param(
        {"state": "up_for_reschedule", "reschedule_date": END, "end_date": END},
        id="up_for_reschedule",
    ),
    pytest.param(
        {
            "state": "deferred",
            "classpath": "airflow.triggers.temporal.DateTimeTrigger",
            "trigger_kwargs": {"moment": END},
            "trigger_timeout": "PT1H",
            "queue": None,
            "next_method": "execute_complete",
            "next_kwargs": {"a": 1},
            "rendered_map_index": None,
        },
        id="deferred",
    ),
]


@pytest.mark.parametrize("body", STATE_PAYLOADS)
def test_state_patch_from_running(make_ti, body):
    ti = make_ti(next_method="old", next_kwargs={"old": True})

    response = client_for(ti).patch(state_url(ti), body, format="json")

    assert response.status_code == 204, response.content
    # by its natural key: up_for_retry gives the task instance a new id (its next try)
    ti = TaskInstance.objects.get(dag_id=ti.dag_id, run_id=ti.run_id, task_id=ti.task_id)
    assert ti.state == body["state"]
    if "end_date" in body:
        assert ti.end_date == datetime.fromisoformat(body["end_date"]).astimezone(UTC)
        assert ti.duration == pytest.approx((ti.end_date - ti.start_date).total_seconds())
    if body["state"] == "success":
        assert (ti.next_method, ti.next_kwargs) == (None, None)
    if body["state"] == "up_for_reschedule":
        assert ti.task_reschedule_count == 1
        assert ti.reschedule_date is not None
    if body["state"] == "deferred":
        # a trigger row for a triggerer, and what to resume with (Airflow's ti_update_state)
        assert ti.trigger is not None
        assert ti.trigger.classpath == body["classpath"]
        assert json.loads(ti.trigger.kwargs) == body["trigger_kwargs"]
        assert (ti.next_method, ti.next_kwargs) == ("execute_complete", {"a": 1})
        assert ti.trigger_timeout is not None
        assert ti.trigger_timeout - ti.trigger.created_date == timedelta(hours=1)
    if body["state"] == "removed":
        assert ti.rendered_map_index == "x"


@pytest.mark.parametrize("body", STATE_PAYLOADS)
def test_same_state_again_is_200_and_writes_nothing(make_ti, body):
    ti = make_ti(state=body["state"])
    before = TaskInstance.objects.values().get(pk=ti.pk)

    response = client_for(ti).patch(state_url(ti), body, format="json")

    assert response.status_code == 200
    assert TaskInstance.objects.values().get(pk=ti.pk) == before


@pytest.mark.parametrize(
    ("body", "stored"),
    [
        pytest.param(body, stored, id=f"{param.id}-from-{stored}")
        for param in STATE_PAYLOADS
        for body in param.values
        for stored in ("queued", "scheduled", "success", "failed", None)
        if stored != body["state"]  # the same state is the 200 case above
    ],
)
def test_not_running_is_409_invalid_state(make_ti, body, stored):
    ti = make_ti(state=stored)

    response = client_for(ti).patch(state_url(ti), body, format="json")

    assert response.status_code == 409
    assert response["Content-Type"] == "application/json"
    assert response.json() == {
        "detail": {
            "reason": "invalid_state",
            "message": "TI was not in the running state so it cannot be updated",
            "previous_state": stored,
        }
    }
    ti.refresh_from_db()
    assert ti.state == stored


def test_repeated_identical_success_is_200_with_no_new_rows(declare, make_ti):
    declare(PRODUCER_MANIFEST)
    ti = make_ti()
    body = wire_sample("success_mixed")
    client = client_for(ti)

    first = client.patch(state_url(ti), body, format="json")
    counts = (AssetEvent.objects.count(), AssetAliasAssetEvent.objects.count())
    second = client.patch(state_url(ti), body, format="json")

    assert (first.status_code, second.status_code) == (204, 200)
    assert (AssetEvent.objects.count(), AssetAliasAssetEvent.objects.count()) == counts == (2, 1)


def test_unknown_task_instance_is_404(runner):
    ti_id = "0195e0b8-0000-7000-8000-000000000000"

    response = runner(ti_id).patch(state_url(ti_id), wire_sample("failed_state"), format="json")

    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert response.json()["detail"]["reason"] == "not_found"


# --- validation --------------------------------------------------------------------------------


def _success(**overrides):
    return {
        "state": "success",
        "end_date": END,
        "task_outlets": [],
        "outlet_events": [],
        **overrides,
    }


ASSET_EVENT = {"dest_asset_key": {"name": "a", "uri": "s3://a"}, "extra": {}}
ALIAS_EVENT = {
    "source_alias_name": "al",
    "dest_asset_key": {"name": "a", "uri": "s3://a"},
    "extra": {},
}


@pytest.mark.parametrize(
    "body", [_success(), wire_sample("failed_state")], ids=["success", "failed"]
)
def test_omitted_rendered_map_index_keeps_the_stored_one(make_ti, body):
    # given a TI whose rendered_map_index was stored earlier (e.g. before a deferral)
    ti = make_ti(rendered_map_index="region=eu")
    body = {key: value for key, value in body.items() if key != "rendered_map_index"}

    response = client_for(ti).patch(state_url(ti), body, format="json")

    assert response.status_code == 204, response.content
    ti.refresh_from_db()
    assert ti.rendered_map_index == "region=eu"


def test_explicit_null_rendered_map_index_clears_the_stored_one(make_ti):
    ti = make_ti(rendered_map_index="region=eu")

    response = client_for(ti).patch(state_url(ti), _success(rendered_map_index=None), format="json")

    assert response.status_code == 204, response.content
    ti.refresh_from_db()
    assert ti.rendered_map_index is None


@pytest.mark.parametrize(
    ("body", "loc"),
    [
        pytest.param({"state": "running"}, ["body", "state"], id="state-running"),
        pytest.param({"state": "queued", "end_date": END}, ["body", "state"], id="state-queued"),
        pytest.param({"end_date": END}, ["body", "state"], id="state-missing"),
        pytest.param(_success(surprise=1), ["body", "surprise"], id="unknown-key"),
        pytest.param(
            _success(end_date="2026-11-30T04:50:58"), ["body", "end_date"], id="naive-datetime"
        ),
        pytest.param(_success(end_date="yesterday"), ["body", "end_date"], id="bad-datetime"),
        pytest.param({"state": "failed"}, ["body", "end_date"], id="end-date-missing"),
        pytest.param(
            _success(task_outlets=[{"name": "a", "uri": "s3://a", "type": "Asset", "x": 1}]),
            ["body", "task_outlets", 0, "x"],
            id="profile-unknown-key",
        ),
        pytest.param(
            _success(task_outlets=[{"name": "a", "uri": "s3://a", "type": "Dataset"}]),
            ["body", "task_outlets", 0, "type"],
            id="profile-bad-type",
        ),
        pytest.param(
            _success(task_outlets=[{"name": "a", "uri": "s3://a"}]),
            ["body", "task_outlets", 0, "type"],
            id="profile-untyped",
        ),
        pytest.param(
            _success(task_outlets=[{"name": "x" * 1501, "uri": "s3://a", "type": "Asset"}]),
            ["body", "task_outlets", 0, "name"],
            id="name-too-long",
        ),
        pytest.param(
            _success(task_outlets=[{"name": "", "uri": "s3://a", "type": "Asset"}]),
            ["body", "task_outlets", 0, "name"],
            id="name-empty",
        ),
        pytest.param(
            _success(outlet_events=[{**ASSET_EVENT, "extra": ["no"]}]),
            ["body", "outlet_events", 0, "extra"],
            id="extra-not-object",
        ),
        pytest.param(
            _success(outlet_events=[{**ALIAS_EVENT, "dest_asset_extra": "no"}]),
            ["body", "outlet_events", 0, "dest_asset_extra"],
            id="dest-asset-extra-not-object",
        ),
        pytest.param(
            _success(outlet_events=[{**ASSET_EVENT, "partition_key": ""}]),
            ["body", "outlet_events", 0, "partition_key"],
            id="partition-key-empty",
        ),
        pytest.param(
            _success(outlet_events=[{**ASSET_EVENT, "partition_key": "   "}]),
            ["body", "outlet_events", 0, "partition_key"],
            id="partition-key-blank",
        ),
        pytest.param(
            _success(outlet_events=[{**ASSET_EVENT, "partition_key": "p" * 251}]),
            ["body", "outlet_events", 0, "partition_key"],
            id="partition-key-too-long",
        ),
        pytest.param(
            _success(outlet_events=[{**ASSET_EVENT, "bogus": 1}]),
            ["body", "outlet_events", 0, "bogus"],
            id="event-unknown-key",
        ),
        pytest.param(
            _success(outlet_events=[{"extra": {}}]),
            ["body", "outlet_events", 0],
            id="event-unrecognized",
        ),
        pytest.param(
            _success(outlet_events=[{**ALIAS_EVENT, "dest_asset_key": {"name": "a"}}]),
            ["body", "outlet_events", 0, "dest_asset_key", "uri"],
            id="dest-key-missing-uri",
        ),
        pytest.param([1, 2], ["body", "state"], id="body-not-object"),
        pytest.param(_success(task_outlets=[None]), ["body", "task_outlets", 0], id="profile-null"),
        pytest.param(
            _success(end_date="9999-12-31T23:59:59-05:00"),
            ["body", "end_date"],
            id="datetime-beyond-year-9999-in-utc",
        ),
        pytest.param(
            _success(outlet_events=[{**ALIAS_EVENT, "source_alias_name": "al\x00"}]),
            ["body", "outlet_events", 0, "source_alias_name"],
            id="nul-in-alias-name",
        ),
        pytest.param(
            _success(outlet_events=[{**ASSET_EVENT, "extra": {"k": ["v\x00"]}}]),
            ["body", "outlet_events", 0, "extra", "k", 0],
            id="nul-in-extra",
        ),
        pytest.param(
            {
                "state": "deferred",
                "classpath": "airflow.triggers.temporal.DateTimeTrigger",
                "trigger_timeout": "999999999 00:00:00",
                "next_method": "execute_complete",
            },
            ["body", "trigger_timeout"],
            id="trigger-timeout-out-of-range",
        ),
    ],
)
def test_invalid_payload_is_422(make_ti, body, loc):
    ti = make_ti()

    response = client_for(ti).patch(state_url(ti), body, format="json")

    assert response.status_code == 422, response.content
    assert response["Content-Type"] == "application/json"
    errors = response.json()["detail"]
    assert loc in [error["loc"] for error in errors], errors
    assert all({"loc", "msg", "type"} <= set(error) for error in errors)
    ti.refresh_from_db()
    assert ti.state == "running"


def test_422_names_every_bad_field(make_ti):
    ti = make_ti()
    body = _success(
        end_date="2026-01-01T00:00:00",
        extra_key=True,
        task_outlets=[{"name": "a", "type": "Asset"}],
        outlet_events=[{**ASSET_EVENT, "extra": 1}, {**ALIAS_EVENT, "partition_key": " "}],
    )

    response = client_for(ti).patch(state_url(ti), body, format="json")

    assert response.status_code == 422
    locs = [error["loc"] for error in response.json()["detail"]]
    assert ["body", "end_date"] in locs
    assert ["body", "extra_key"] in locs
    assert ["body", "task_outlets", 0, "uri"] in locs
    assert ["body", "outlet_events", 0, "extra"] in locs
    assert ["body", "outlet_events", 1, "partition_key"] in locs


def test_invalid_json_is_422(make_ti):
    ti = make_ti()

    response = _send_raw(ti, '{"state": "success",')

    assert response.status_code == 422
    assert response.json()["detail"][0]["type"] == "json_invalid"


def test_outlet_event_cap_is_422(make_ti, settings):
    settings.EXECUTION_API = {**settings.EXECUTION_API, "MAX_OUTLET_EVENTS": 3}
    ti = make_ti()

    response = client_for(ti).patch(
        state_url(ti), _success(outlet_events=[ASSET_EVENT] * 4), format="json"
    )

    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "outlet_events"]


def test_body_over_the_size_limit_is_413(make_ti, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    ti = make_ti()

    response = client_for(ti).patch(
        state_url(ti), _success(outlet_events=[ASSET_EVENT] * 50), format="json"
    )

    assert response.status_code == 413
    assert response["Content-Type"] == "application/json"
    assert response.json()["detail"]["reason"] == "payload_too_large"


def test_trailing_slash_is_404_not_a_redirect(make_ti):
    ti = make_ti()

    response = client_for(ti).patch(state_url(ti) + "/", _success(), format="json")

    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"


# --- atomicity and query count ------------------------------------------------------------------


def test_database_error_mid_registration_rolls_everything_back(seed_dags, make_ti):
    # given a success whose registration fails after the events were inserted
    ti = make_ti("asset_alias_example_alias_producer", "produce_asset_events_through_asset_alias")
    link_table = AssetAliasAssetEvent._meta.db_table

    def fail_on_alias_event_links(execute, sql, params, many, context):
        if f"INSERT INTO {link_table} " in sql:
            raise DatabaseError("injected failure")
        return execute(sql, params, many, context)

    assets_before = Asset.objects.count()

    # when
    with connection.execute_wrapper(fail_on_alias_event_links):
        response = _send_raw(ti, SEED_ALIAS_BODY)

    # then 5xx as JSON and nothing of the success was written
    assert response.status_code == 500
    assert response["Content-Type"] == "application/json"
    assert response.json()["detail"]["reason"] == "database_error"
    assert not AssetEvent.objects.exists()
    assert not AssetAliasAsset.objects.exists()
    assert not AssetAliasAssetEvent.objects.exists()
    assert not AssetDagRunQueue.objects.exists()
    assert Asset.objects.count() == assets_before
    ti.refresh_from_db()
    assert (ti.state, ti.end_date) == ("running", None)


QUERY_COUNT_MANIFEST = """
dags:
  - dag_id: producer
    tasks:
      - task_id: produce
        outlets:
{outlets}
          - alias: bulk_alias
"""


def _asset_outlets(n: int) -> dict:
    return _success(
        task_outlets=[
            {"name": f"a{i}", "uri": f"s3://bulk/{i}", "type": "Asset"} for i in range(n)
        ],
        outlet_events=[{"dest_asset_key": {"name": "a0", "uri": "s3://bulk/0"}, "extra": {}}],
    )


def _alias_events(n: int, offset: int) -> dict:
    return _success(
        task_outlets=[{"name": "bulk_alias", "uri": None, "type": "AssetAlias"}],
        outlet_events=[
            {
                "source_alias_name": "bulk_alias",
                "dest_asset_key": {"name": f"new{i}", "uri": f"s3://new/{i}"},
                "dest_asset_extra": {"i": i},
                "extra": {},
            }
            for i in range(offset, offset + n)
        ],
    )


def _count_success_queries(declare, make_ti, bodies: list[dict]) -> list[int]:
    outlets = "\n".join(
        f'          - asset: {{name: "a{i}", uri: "s3://bulk/{i}"}}' for i in range(100)
    )
    declare(QUERY_COUNT_MANIFEST.format(outlets=outlets))
    counts = []
    for body in bodies:
        ti = make_ti(dag_run=DagRunFactory(dag=DagFactory(dag_id="producer"), state="running"))
        client = client_for(ti)
        with CaptureQueriesContext(connection) as queries:
            response = client.patch(state_url(ti), body, format="json")
        assert response.status_code == 204, response.content
        counts.append(len(queries))
    return counts


def test_success_statements_are_bounded_whatever_the_payload(declare, make_ti):
    # Statements of one success request, the same on PostgreSQL and SQLite: 1 outlet, 100
    # asset outlets, 1,000 alias events to 1,000 distinct new assets, 1 alias event to a new
    # asset, 1 to an existing one.
    #   the API's transaction: a SAVEPOINT/RELEASE pair here (inside the test's transaction);
    #   in it, the UPDATE … RETURNING that checks, locks and finishes the TI, then
    #   registration (assets_app.services.assets.registration), at most 8 statements and only those
    #   with rows to read or write: declared assets run 3 (SELECT declared active assets,
    #   INSERT events, upsert the queue rows of the live consumers); alias events to an
    #   existing asset run all 8 (also INSERT alias targets, INSERT aliases, SELECT aliases,
    #   INSERT alias↔asset links, INSERT alias↔event links), which PostgreSQL receives as 2
    #   and 4 (the two first inserts as one statement, the events and everything written with
    #   them as one); to new assets only, 7 and 3: the targets' INSERT returns them, so
    #   nothing is read back;
    #   after the commit, the run's settle; on PostgreSQL the finishing UPDATE settles the run
    #   of a last leaf itself.
    counts = _count_success_queries(
        declare,
        make_ti,
        [
            _asset_outlets(1),
            _asset_outlets(100),
            _alias_events(1000, 0),
            _alias_events(1, 1000),
            _alias_events(1, 0),
        ],
    )

    assert AssetEvent.objects.count() == 1 + 100 + 1000 + 1 + 1
    if connection.vendor == "postgresql":
        assert counts == [2 + 1 + 2] * 2 + [2 + 1 + 3] * 2 + [2 + 1 + 4], counts
    else:
        assert counts == [2 + 1 + 3 + 1] * 2 + [2 + 1 + 7 + 1] * 2 + [2 + 1 + 8 + 1], counts


def test_success_without_outlets_is_the_floor_of_one_or_two_statements(make_ti):
    # given: the one running task, declaring no outlet, of a running run
    ti = make_ti(dag_run=DagRunFactory(dag=DagFactory(dag_id="producer"), state="running"))
    client = client_for(ti)

    # when
    with CaptureQueriesContext(connection) as queries:
        response = client.patch(state_url(ti), _success(), format="json")

    # then: no transaction (nothing to register): the UPDATE … RETURNING that checks, locks
    # and finishes the TI commits by itself, then the run settles; on PostgreSQL the same
    # statement settles the run (the one-task run's last leaf)
    assert response.status_code == 204, response.content
    sqls = [query["sql"].replace('"', "") for query in queries.captured_queries]
    if connection.vendor == "postgresql":
        assert len(sqls) == 1, sqls
        assert sqls[0].startswith("WITH finished AS (UPDATE task_instance SET state = "), sqls[0]
        assert ", settled AS (UPDATE dag_run SET " in sqls[0], sqls[0]
    else:
        assert len(sqls) == 2, sqls
        assert sqls[0].startswith("UPDATE task_instance SET state = "), sqls[0]
        assert sqls[1].startswith("UPDATE dag_run"), sqls[1]
    assert " RETURNING " in sqls[0], sqls[0]
    assert TaskInstance.objects.get(pk=ti.pk).dag_run.state == "success"


@pytest.mark.parametrize("body", [_success(), {"state": "failed", "end_date": END}])
def test_finishing_checks_locks_and_writes_in_one_update(make_ti, body):
    # given
    ti = make_ti(start_date=datetime(2026, 11, 30, 4, 50, 46, 40508, tzinfo=UTC))
    client = client_for(ti)

    # when
    with CaptureQueriesContext(connection) as queries:
        response = client.patch(state_url(ti), body, format="json")

    # then: by primary key and the running state, no SELECT first; duration exact to the µs
    assert response.status_code == 204, response.content
    update = queries.captured_queries[0]["sql"].replace('"', "").removeprefix("WITH finished AS (")
    assert update.startswith("UPDATE task_instance SET "), update
    assert " WHERE id = " in update, update
    assert " AND state = " in update, update
    assert not any(q["sql"].startswith("SELECT") for q in queries.captured_queries)
    ti.refresh_from_db()
    assert (ti.state, ti.duration) == (body["state"], 12.5)


def test_a_pending_task_instance_is_locked_by_one_cheap_statement(make_ti):
    # given
    ti = make_ti()
    client = client_for(ti)
    body = {"state": "up_for_reschedule", "reschedule_date": END, "end_date": END}

    # when
    with CaptureQueriesContext(connection) as queries:
        response = client.patch(state_url(ti), body, format="json")

    # then: by primary key, no ORDER BY, no join, FOR UPDATE where the database has it
    assert response.status_code == 204, response.content
    lock = queries.captured_queries[1]["sql"]
    assert lock.startswith("SELECT "), lock
    assert ' FROM "task_instance" ' in lock, lock
    assert '"task_instance"."id" = ' in lock or ' WHERE "id" = ' in lock, lock
    assert "ORDER BY" not in lock, lock
    assert "JOIN" not in lock, lock
    assert (" FOR UPDATE" in lock) == (connection.vendor == "postgresql"), lock
    ti.refresh_from_db()
    assert ti.state == body["state"]


def test_a_success_logs_nothing_at_info(make_ti, caplog):
    # given: a running task whose run has another task left (the run does not finish: that
    # is logged once per run)
    ti = make_ti()
    TaskInstanceFactory(dag_run=ti.dag_run, task_id="other")
    client = client_for(ti)

    # when
    with caplog.at_level("INFO"):
        response = client.patch(state_url(ti), _success(), format="json")

    # then: no per-request line by default (the access log is the server's business)
    assert response.status_code == 204, response.content
    assert [r.getMessage() for r in caplog.records if r.levelno >= 20] == []
