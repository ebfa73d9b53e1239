"""The operator API's resources: shapes, filters, writes and the 4xx of every bad input."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.response import Response

from assets_app.exceptions import (
    AssetAmbiguousError,
    ConflictError,
    DagRunNotFoundError,
    InvalidInputError,
    TaskInstanceInvalidStateError,
)
from assets_app.models import (
    Asset,
    AssetActive,
    AssetAliasAsset,
    AssetAliasAssetEvent,
    AssetDagRunQueue,
    AssetEvent,
    Dag,
    DagRunAssetEvent,
    DagScheduleAssetReference,
)
from operatorapi.exceptions import exception_handler
from tests.factories import (
    AssetAliasFactory,
    AssetEventFactory,
    AssetFactory,
    DagFactory,
    DagRunFactory,
)

pytestmark = pytest.mark.django_db

API = "/api/v1"


def results(response: Response) -> list[dict]:
    assert response.status_code == 200, response.content
    return response.json()["results"]


def ids(response: Response, key: str = "id") -> list:
    return [row[key] for row in results(response)]


def activate(asset: Asset) -> Asset:
    AssetActive.objects.create(asset=asset, name=asset.name, uri=asset.uri)
    return asset


# --- root, unknown routes, methods ------------------------------------------------------------


def test_root_lists_the_resources_schema_and_docs(api):
    response = api.get(f"{API}/")

    assert response.status_code == 200
    assert response.json() == {
        name: f"http://testserver{API}/{path}"
        for name, path in [
            ("assets", "assets"),
            ("asset-aliases", "asset-aliases"),
            ("asset-events", "asset-events"),
            ("dags", "dags"),
            ("import-errors", "import-errors"),
            ("dag-runs", "dag-runs"),
            ("queue", "queue"),
            ("executor", "executor"),
            ("variables", "variables"),
            ("connections", "connections"),
            ("openapi", "openapi.json"),
            ("docs", "docs"),
        ]
    }


@pytest.mark.parametrize(
    "path",
    [
        pytest.param("/no-such-thing", id="unknown"),
        pytest.param("/assets/", id="trailing-slash"),
        pytest.param("/assets/abc", id="non-integer-id"),
        pytest.param("/assets.json", id="format-suffix"),
    ],
)
def test_unknown_paths_are_a_json_404(api, path):
    response = api.get(f"{API}{path}")

    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"detail": f"No route for GET {API}{path}", "code": "not_found"}


@pytest.mark.parametrize(
    ("method", "path"),
    [
        pytest.param("put", "/dags/d", id="put-dag"),
        pytest.param("delete", "/asset-events/1", id="delete-event"),
        pytest.param("post", "/assets", id="post-asset"),
        pytest.param("post", "/queue", id="post-queue"),
    ],
)
def test_unsupported_methods_are_405(client_for, method, path):
    # given: a superuser, so that no permission check answers first
    DagFactory(dag_id="d")
    AssetEventFactory()
    client = client_for("root", is_superuser=True)

    response = getattr(client, method)(f"{API}{path}", {}, format="json")

    assert response.status_code == 405, response.content
    assert response.json() == {
        "detail": f'Method "{method.upper()}" not allowed.',
        "code": "method_not_allowed",
    }


def test_object_not_found_is_a_json_404(api):
    response = api.get(f"{API}/assets/999999")

    assert response.status_code == 404
    assert response.json() == {"detail": "No Asset matches the given query.", "code": "not_found"}


def test_an_id_too_large_for_the_column_is_not_found(api):
    response = api.get(f"{API}/asset-events/{2**70}")

    assert response.status_code == 404


def test_a_retrieve_takes_no_query_parameters(api):
    asset = AssetFactory()

    response = api.get(f"{API}/assets/{asset.pk}", {"name": asset.name})

    assert response.status_code == 400
    assert response.json() == {"name": ["This resource takes no query parameters."]}


# --- domain errors ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "status", "body"),
    [
        pytest.param(
            DagRunNotFoundError(),
            404,
            {"detail": "DAG run not found", "code": "not_found"},
            id="404",
        ),
        pytest.param(
            TaskInstanceInvalidStateError(previous_state="success"),
            409,
            {
                "detail": "TI was not in the running state so it cannot be updated",
                "code": "invalid_state",
                "previous_state": "success",
            },
            id="409-with-context",
        ),
        pytest.param(
            ConflictError("busy"), 409, {"detail": "busy", "code": "conflict"}, id="409-family"
        ),
        pytest.param(
            AssetAmbiguousError("two of them"),
            400,
            {"detail": "two of them", "code": "ambiguous_asset"},
            id="400",
        ),
        pytest.param(
            InvalidInputError("bad"), 400, {"detail": "bad", "code": "invalid_input"}, id="400-base"
        ),
    ],
)
def test_domain_errors_map_by_family(error, status, body):
    response = exception_handler(error, {})

    assert response.status_code == status
    assert response.data == body


# --- assets -------------------------------------------------------------------------------------


def test_assets_list_their_fields(api):
    # given
    asset = activate(AssetFactory(name="orders", uri="s3://b/orders", group="g", extra={"k": 1}))
    for name in ("b-alias", "a-alias"):
        AssetAliasAsset.objects.create(alias=AssetAliasFactory(name=name), asset=asset)

    # when
    (row,) = results(api.get(f"{API}/assets"))

    # then
    assert row == {
        "id": asset.pk,
        "name": "orders",
        "uri": "s3://b/orders",
        "group": "g",
        "extra": {"k": 1},
        "active": True,
        "aliases": ["a-alias", "b-alias"],
        "created_at": asset.created_at.isoformat().replace("+00:00", "Z"),
        "updated_at": Asset.objects.get().updated_at.isoformat().replace("+00:00", "Z"),
    }
    assert api.get(f"{API}/assets/{asset.pk}").json() == row


def test_assets_filters(api):
    # given
    a = activate(AssetFactory(name="a", uri="s3://x/a", group="raw"))
    b = AssetFactory(name="b", uri="s3://x/b", group="raw")
    c = activate(AssetFactory(name="c", uri="s3://x/c", group="clean"))
    AssetFactory(name="a", uri="s3://y/a", group="clean")  # same name, other uri

    # then
    assert len(ids(api.get(f"{API}/assets", {"name": "a"}))) == 2
    assert ids(api.get(f"{API}/assets", {"uri": "s3://x/a"})) == [a.pk]
    assert ids(api.get(f"{API}/assets", {"group": "raw"})) == [a.pk, b.pk]
    assert ids(api.get(f"{API}/assets", {"active": "true"})) == [a.pk, c.pk]
    assert b.pk in ids(api.get(f"{API}/assets", {"active": "false"}))
    assert ids(api.get(f"{API}/assets", {"active": "true", "group": "clean"})) == [c.pk]
    assert ids(api.get(f"{API}/assets", {"name": "nope"})) == []
    assert len(ids(api.get(f"{API}/assets", {"name": ""}))) == 4  # empty: no filter


@pytest.mark.parametrize(
    ("params", "body"),
    [
        pytest.param({"active": "yes"}, {"active": ["Must be true or false."]}, id="bool"),
        pytest.param({"active": "1"}, {"active": ["Must be true or false."]}, id="bool-digit"),
        pytest.param(
            {"name": "x" * 1501},
            {"name": ["Ensure this value has at most 1500 characters (it has 1501)."]},
            id="too-long",
        ),
        pytest.param(
            {"nmae": "a"},
            {
                "nmae": [
                    "Unknown query parameter; this list accepts active, cursor, group, name, "
                    "page_size, uri."
                ]
            },
            id="unknown",
        ),
        pytest.param({"name": ["a", "b"]}, {"name": ["Give this parameter once."]}, id="twice"),
    ],
)
def test_assets_bad_filters_are_400_naming_the_parameter(api, params, body):
    response = api.get(f"{API}/assets", params)

    assert response.status_code == 400
    assert response.json() == body


def test_bad_filters_are_reported_together(api):
    response = api.get(f"{API}/asset-events", {"after": "yesterday", "asset_id": "x", "foo": "1"})

    assert response.status_code == 400
    assert set(response.json()) == {"after", "asset_id", "foo"}
    assert response.json()["after"] == ["Enter a valid date/time."]
    assert response.json()["asset_id"] == ["Enter a whole number."]


# --- aliases ------------------------------------------------------------------------------------


def test_aliases_with_their_assets_and_filters(api):
    # given
    alias = AssetAliasFactory(name="exports", group="team")
    other = AssetAliasFactory(name="other")
    b, a = AssetFactory(name="b"), AssetFactory(name="a")
    for asset in (b, a):
        AssetAliasAsset.objects.create(alias=alias, asset=asset)

    # when
    rows = results(api.get(f"{API}/asset-aliases"))

    # then
    assert rows == [
        {
            "id": alias.pk,
            "name": "exports",
            "group": "team",
            "assets": [
                {"id": a.pk, "name": "a", "uri": a.uri, "group": ""},
                {"id": b.pk, "name": "b", "uri": b.uri, "group": ""},
            ],
        },
        {"id": other.pk, "name": "other", "group": "", "assets": []},
    ]
    assert ids(api.get(f"{API}/asset-aliases", {"name": "other"})) == [other.pk]
    assert ids(api.get(f"{API}/asset-aliases", {"group": "team"})) == [alias.pk]
    assert api.get(f"{API}/asset-aliases/{alias.pk}").json() == rows[0]


# --- asset events -------------------------------------------------------------------------------


def test_events_newest_first_with_their_asset_aliases_and_runs(api):
    # given
    asset = AssetFactory(name="orders", uri="s3://b/orders")
    first = AssetEventFactory(asset=asset)
    second = AssetEventFactory(
        asset=asset,
        extra={"rows": 3},
        source_dag_id="producer",
        source_task_id="export",
        source_run_id="manual__1",
        source_map_index=2,
        partition_key="2026-01-01",
    )
    AssetAliasAssetEvent.objects.create(alias=AssetAliasFactory(name="exports"), event=second)
    run = DagRunFactory(dag=DagFactory(dag_id="consumer"), run_id="asset_triggered__x")
    DagRunAssetEvent.objects.create(dag_run=run, event=second)

    # when
    rows = results(api.get(f"{API}/asset-events"))

    # then
    assert [row["id"] for row in rows] == [second.pk, first.pk]
    assert rows[0] == {
        "id": second.pk,
        "asset_id": asset.pk,
        "asset": {"id": asset.pk, "name": "orders", "uri": "s3://b/orders", "group": ""},
        "extra": {"rows": 3},
        "source_dag_id": "producer",
        "source_task_id": "export",
        "source_run_id": "manual__1",
        "source_map_index": 2,
        "partition_key": "2026-01-01",
        "timestamp": second.timestamp.isoformat().replace("+00:00", "Z"),
        "source_aliases": ["exports"],
        "created_dagruns": [
            {
                "id": run.pk,
                "dag_id": "consumer",
                "run_id": "asset_triggered__x",
                "run_type": "manual",
                "state": "queued",
            }
        ],
    }
    assert api.get(f"{API}/asset-events/{second.pk}").json() == rows[0]


def test_an_event_whose_asset_was_deleted_shows_no_asset(api):
    event = AssetEventFactory()
    asset_id = event.asset_id
    Asset.objects.filter(pk=asset_id).delete()

    row = api.get(f"{API}/asset-events/{event.pk}").json()

    assert (row["asset_id"], row["asset"]) == (asset_id, None)


def test_events_filters(api):
    # given
    now = timezone.now()
    orders = AssetFactory(name="orders", uri="s3://b/orders")
    users = AssetFactory(name="users", uri="s3://b/users")
    old = AssetEventFactory(asset=orders, timestamp=now - timedelta(days=2))
    mid = AssetEventFactory(
        asset=orders,
        timestamp=now - timedelta(days=1),
        source_dag_id="p2",
        source_task_id="t2",
        source_run_id="r2",
        source_map_index=3,  # produced by one map index of a mapped task
    )
    new = AssetEventFactory(asset=users, timestamp=now)
    AssetAliasAssetEvent.objects.create(alias=AssetAliasFactory(name="exports"), event=new)
    run = DagRunFactory()
    DagRunAssetEvent.objects.create(dag_run=run, event=old)

    def events(**params) -> list[int]:
        return ids(api.get(f"{API}/asset-events", params))

    # then
    assert events(asset_id=orders.pk) == [mid.pk, old.pk]
    assert events(asset_name="users") == [new.pk]
    assert events(asset_uri="s3://b/orders") == [mid.pk, old.pk]
    assert events(alias="exports") == [new.pk]
    assert events(alias="nope") == []
    assert events(source_dag_id="p2") == [mid.pk]
    assert events(source_task_id="t2") == [mid.pk]
    assert events(source_run_id="r2") == [mid.pk]
    assert events(source_map_index=3) == [mid.pk]
    assert api.get(f"{API}/asset-events", {"source_map_index": "1.5"}).status_code == 400
    assert api.get(f"{API}/asset-events", {"source_map_index": -2}).status_code == 400
    assert events(consumed_by_run=run.pk) == [old.pk]
    # after/before are inclusive
    assert events(after=mid.timestamp.isoformat()) == [new.pk, mid.pk]
    assert events(before=mid.timestamp.isoformat()) == [mid.pk, old.pk]
    assert events(after=mid.timestamp.isoformat(), before=mid.timestamp.isoformat()) == [mid.pk]
    assert events(after=(now - timedelta(hours=36)).strftime("%Y-%m-%dT%H:%M:%SZ")) == [
        new.pk,
        mid.pk,
    ]
    assert events(asset_name="orders", source_dag_id="p2") == [mid.pk]


@pytest.mark.parametrize(
    ("params", "body"),
    [
        pytest.param({"after": "2026-13-01"}, {"after": ["Enter a valid date/time."]}, id="date"),
        pytest.param({"before": "soon"}, {"before": ["Enter a valid date/time."]}, id="before"),
        pytest.param({"asset_id": "1.5"}, {"asset_id": ["Enter a whole number."]}, id="id-float"),
        pytest.param(
            {"asset_id": "0"},
            {"asset_id": ["Ensure this value is greater than or equal to 1."]},
            id="id-zero",
        ),
        pytest.param(
            {"consumed_by_run": str(2**64)},
            {"consumed_by_run": [f"Ensure this value is less than or equal to {2**63 - 1}."]},
            id="id-overflow",
        ),
        pytest.param(
            {"source_dag_id": "d" * 251},
            {"source_dag_id": ["Ensure this value has at most 250 characters (it has 251)."]},
            id="dag-id-too-long",
        ),
    ],
)
def test_events_bad_filters_are_400_naming_the_parameter(api, params, body):
    response = api.get(f"{API}/asset-events", params)

    assert response.status_code == 400
    assert response.json() == body


# --- POST an asset event ------------------------------------------------------------------------


@pytest.fixture
def orders_with_consumer() -> tuple[Asset, Dag]:
    """An active asset and a DAG scheduled on it (as declare_dags writes them)."""
    asset = activate(AssetFactory(name="orders", uri="s3://b/orders"))
    dag = DagFactory(
        dag_id="orders_report",
        asset_expression={"asset": {"name": asset.name, "uri": asset.uri}},
        task_ids=["report"],
    )
    DagScheduleAssetReference.objects.create(asset=asset, dag=dag)
    return asset, dag


@pytest.mark.parametrize(
    "key",
    [
        pytest.param({"name": "orders"}, id="by-name"),
        pytest.param({"uri": "s3://b/orders"}, id="by-uri"),
        pytest.param({"name": "orders", "uri": "s3://b/orders"}, id="by-both"),
    ],
)
def test_post_event_records_it_and_queues_the_consumers(
    api, orders_with_consumer, key, django_capture_on_commit_callbacks
):
    # given
    asset, consumer = orders_with_consumer

    # when
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(
            f"{API}/asset-events",
            {**key, "extra": {"rows": 7, "nested": [1, {"a": None}]}},
            format="json",
        )

    # then: 201 with the event, and the consumer DAG is queued on the asset
    assert response.status_code == 201, response.content
    event = AssetEvent.objects.get()
    body = response.json()
    assert body["id"] == event.pk
    assert body["asset"] == {"id": asset.pk, "name": "orders", "uri": "s3://b/orders", "group": ""}
    assert body["extra"] == {"rows": 7, "nested": [1, {"a": None}]}
    assert (body["source_dag_id"], body["source_task_id"], body["partition_key"]) == (
        None,
        None,
        None,
    )
    assert response["Location"] == f"http://testserver{API}/asset-events/{event.pk}"
    assert list(AssetDagRunQueue.objects.values_list("asset_id", "target_dag_id")) == [
        (asset.pk, consumer.pk)
    ]


def test_post_event_with_a_partition_key_queues_no_consumer(api, orders_with_consumer):
    response = api.post(
        f"{API}/asset-events", {"name": "orders", "partition_key": "2026-01-01"}, format="json"
    )

    assert response.status_code == 201, response.content
    assert response.json()["partition_key"] == "2026-01-01"
    assert response.json()["extra"] == {}
    assert not AssetDagRunQueue.objects.exists()


def test_post_event_on_an_unknown_asset_is_404(api, orders_with_consumer):
    response = api.post(f"{API}/asset-events", {"name": "nope"}, format="json")

    assert response.status_code == 404
    assert response.json() == {"detail": "no asset with name 'nope'", "code": "not_found"}
    assert not AssetEvent.objects.exists()


def test_post_event_on_an_ambiguous_name_is_400(api):
    # given: two inactive assets share the name
    AssetFactory(name="dup", uri="s3://a/dup")
    AssetFactory(name="dup", uri="s3://b/dup")

    # when
    response = api.post(f"{API}/asset-events", {"name": "dup"}, format="json")

    # then
    assert response.status_code == 400
    assert response.json() == {
        "detail": "several inactive assets have name 'dup'; give both name and uri",
        "code": "ambiguous_asset",
    }
    assert not AssetEvent.objects.exists()


@pytest.mark.parametrize(
    ("payload", "body"),
    [
        pytest.param({}, {"name": ["Give the asset's name, its uri or both."]}, id="no-key"),
        pytest.param(
            {"name": "orders", "extra": [1]},
            {"extra": ['Expected a dictionary of items but got type "list".']},
            id="extra-list",
        ),
        pytest.param(
            {"name": "orders", "extra": "{}"},
            {"extra": ['Expected a dictionary of items but got type "str".']},
            id="extra-string",
        ),
        pytest.param(
            {"name": "orders", "extra": {"a": ["ok", "bad\u0000"]}},
            {"extra": ["Must not contain NUL characters (\\u0000); found at extra.a[1]."]},
            id="extra-nul",
        ),
        pytest.param({"name": 5}, {"name": ["Not a valid string."]}, id="name-int"),
        pytest.param({"name": ""}, {"name": ["This field may not be blank."]}, id="name-blank"),
        pytest.param(
            {"name": "orders", "partition_key": 1},
            {"partition_key": ["Not a valid string."]},
            id="partition-int",
        ),
        pytest.param(
            {"name": "orders", "partition_key": "p" * 251},
            {"partition_key": ["Ensure this field has no more than 250 characters."]},
            id="partition-long",
        ),
        pytest.param(
            {"name": "orders", "partiton_key": "p"},
            {"partiton_key": ["Unknown field; expected name, uri, extra, partition_key."]},
            id="unknown-field",
        ),
        pytest.param(
            [{"name": "orders"}],
            {"non_field_errors": ["Invalid data. Expected a dictionary, but got list."]},
            id="not-an-object",
        ),
    ],
)
def test_post_event_bad_payloads_are_400_naming_the_field(api, orders_with_consumer, payload, body):
    response = api.post(f"{API}/asset-events", payload, format="json")

    assert response.status_code == 400
    assert response.json() == body
    assert not AssetEvent.objects.exists()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        pytest.param('{"r": 1e400}', "extra['r']: Infinity is not valid JSON", id="1e400"),
        pytest.param(
            '{"r": ["\\ud800"]}',
            "extra['r'][0]: contains the lone surrogate U+D800, which is not valid Unicode",
            id="surrogate",
        ),
        pytest.param(
            '{"d": ' + "[" * 64 + "]" * 64 + "}",
            "extra['d'][0][0][0][…][0]: nested deeper than 64 levels",
            id="too-deep",
        ),
    ],
)
def test_post_event_with_an_extra_no_database_stores_is_400(
    api, orders_with_consumer, extra, message
):
    body = f'{{"name": "orders", "extra": {extra}}}'
    response = api.post(f"{API}/asset-events", body, content_type="application/json")

    assert response.status_code == 400, response.content
    assert response.json() == {"extra": [f"Cannot be stored: {message}."]}
    assert not AssetEvent.objects.exists()


def test_post_event_extra_too_large_is_400(api, orders_with_consumer, settings):
    settings.OPERATOR_API = {**settings.OPERATOR_API, "MAX_EXTRA_BYTES": 20}

    ok = api.post(
        f"{API}/asset-events", {"name": "orders", "extra": {"k": "x" * 12}}, format="json"
    )
    too_big = api.post(
        f"{API}/asset-events", {"name": "orders", "extra": {"k": "x" * 13}}, format="json"
    )

    assert ok.status_code == 201  # {"k":"xxxxxxxxxxxx"} is 20 bytes
    assert too_big.status_code == 400
    assert too_big.json() == {"extra": ["Must be at most 20 bytes as JSON, got 21."]}


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        pytest.param(b"{", "JSON parse error - Expecting property name", id="truncated"),
        pytest.param(b'{"name": NaN}', "JSON parse error - Out of range float values", id="nan"),
        pytest.param(b"\xff", "JSON parse error - 'utf-8' codec can't decode", id="not-utf8"),
        pytest.param(b"[" * 100_000, "JSON parse error - maximum recursion depth", id="deep"),
    ],
)
def test_post_event_bad_json_is_400(api, body, detail):
    response = api.generic("POST", f"{API}/asset-events", body, content_type="application/json")

    assert response.status_code == 400
    assert response.json()["code"] == "parse_error"
    assert response.json()["detail"].startswith(detail)


def test_post_event_that_is_not_json_is_415(api):
    response = api.post(f"{API}/asset-events", {"name": "orders"}, format="multipart")

    assert response.status_code == 415
    assert response.json()["code"] == "unsupported_media_type"


def test_post_event_body_over_the_limit_is_413(api, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100

    response = api.generic(
        "POST",
        f"{API}/asset-events",
        json.dumps({"name": "orders", "extra": {"k": "x" * 200}}),
        content_type="application/json",
    )

    assert response.status_code == 413
    assert response.json() == {
        "detail": "Request body is too large (at most 100 bytes)",
        "code": "payload_too_large",
    }


# --- DAGs ---------------------------------------------------------------------------------------


def test_dags_list_filter_and_retrieve(api):
    # given: dag ids with dots and dashes (allowed by the manifest)
    paused = DagFactory(
        dag_id="team.orders-report",
        is_paused=True,
        asset_expression={"any": [{"asset": {"name": "a", "uri": "a"}}, {"alias": {"name": "x"}}]},
        task_ids=["report"],
    )
    stale = DagFactory(dag_id="old", is_stale=True)

    # then
    assert ids(api.get(f"{API}/dags"), "dag_id") == ["old", "team.orders-report"]
    assert ids(api.get(f"{API}/dags", {"is_paused": "true"}), "dag_id") == [paused.dag_id]
    assert ids(api.get(f"{API}/dags", {"is_stale": "true"}), "dag_id") == [stale.dag_id]
    assert ids(api.get(f"{API}/dags", {"is_stale": "false"}), "dag_id") == [paused.dag_id]
    response = api.get(f"{API}/dags/team.orders-report")
    assert response.status_code == 200
    assert response.json() == {
        "dag_id": "team.orders-report",
        "is_paused": True,
        "is_stale": False,
        "schedule": "a | alias:x",
        "asset_expression": paused.asset_expression,
        "timetable_summary": "",
        "max_active_runs": 16,
        "max_active_tasks": 16,
        "tags": [],
        "next_dagrun_create_after": None,
        "task_ids": ["report"],
        "fileloc": "",
        "last_parsed_time": None,
    }


def test_patch_pauses_and_unpauses_a_dag(api):
    DagFactory(dag_id="d.1")

    paused = api.patch(f"{API}/dags/d.1", {"is_paused": True}, format="json")
    assert paused.status_code == 200, paused.content
    assert paused.json()["is_paused"] is True
    assert Dag.objects.get().is_paused is True

    unpaused = api.patch(f"{API}/dags/d.1", {"is_paused": False}, format="json")
    assert unpaused.json()["is_paused"] is False
    assert Dag.objects.get().is_paused is False


@pytest.mark.parametrize(
    ("payload", "body"),
    [
        pytest.param({}, {"is_paused": ["This field is required."]}, id="missing"),
        pytest.param({"is_paused": "true"}, {"is_paused": ["Must be true or false."]}, id="str"),
        pytest.param({"is_paused": 1}, {"is_paused": ["Must be true or false."]}, id="int"),
        pytest.param(
            {"is_paused": None}, {"is_paused": ["This field may not be null."]}, id="null"
        ),
        pytest.param(
            {"is_paused": True, "is_stale": False},
            {"is_stale": ["Unknown field; expected is_paused."]},
            id="unknown",
        ),
    ],
)
def test_patch_dag_bad_payloads_are_400(api, payload, body):
    DagFactory(dag_id="d")

    response = api.patch(f"{API}/dags/d", payload, format="json")

    assert response.status_code == 400
    assert response.json() == body
    assert Dag.objects.get().is_paused is False


def test_patch_unknown_dag_is_404(api):
    response = api.patch(f"{API}/dags/nope", {"is_paused": True}, format="json")

    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


# --- DAG runs and the queue ---------------------------------------------------------------------


def test_dag_runs_newest_first_with_filters(api):
    # given
    a, b = DagFactory(dag_id="a"), DagFactory(dag_id="b")
    first = DagRunFactory(dag=a, run_id="manual__1", state="success", run_type="manual")
    second = DagRunFactory(dag=a, run_id="asset_triggered__2", run_type="asset_triggered")
    third = DagRunFactory(dag=b, run_id="scheduled__3", state="failed", run_type="scheduled")

    # then
    rows = results(api.get(f"{API}/dag-runs"))
    assert [row["id"] for row in rows] == [third.pk, second.pk, first.pk]
    assert set(rows[0]) == {
        "id",
        "dag_id",
        "run_id",
        "run_type",
        "state",
        "logical_date",
        "data_interval_start",
        "data_interval_end",
        "run_after",
        "start_date",
        "end_date",
        "created_at",
        "conf",
        "partition_key",
        "triggered_by",
        "triggering_user_name",
    }
    assert ids(api.get(f"{API}/dag-runs", {"dag_id": "a"})) == [second.pk, first.pk]
    assert ids(api.get(f"{API}/dag-runs", {"run_id": "manual__1"})) == [first.pk]
    assert ids(api.get(f"{API}/dag-runs", {"state": "queued"})) == [second.pk]
    assert ids(api.get(f"{API}/dag-runs", {"state": ["success", "failed"]})) == [
        third.pk,
        first.pk,
    ]
    assert ids(api.get(f"{API}/dag-runs", {"run_type": "asset_triggered"})) == [second.pk]
    assert ids(api.get(f"{API}/dag-runs", {"dag_id": "a", "state": "failed"})) == []
    assert api.get(f"{API}/dag-runs/{first.pk}").json()["run_id"] == "manual__1"


def test_dag_runs_bad_state_is_400(api):
    response = api.get(f"{API}/dag-runs", {"state": ["queued", "paused"]})

    assert response.status_code == 400
    assert response.json() == {
        "state": ["Select a valid choice. paused is not one of the available choices."]
    }


def test_queue_lists_waiting_consumers_oldest_first(api):
    # given
    orders, users = AssetFactory(name="orders"), AssetFactory(name="users")
    a, b = DagFactory(dag_id="a"), DagFactory(dag_id="b")
    first = AssetDagRunQueue.objects.create(asset=orders, target_dag=a)
    second = AssetDagRunQueue.objects.create(asset=users, target_dag=a)
    third = AssetDagRunQueue.objects.create(asset=orders, target_dag=b)

    # then
    rows = results(api.get(f"{API}/queue"))
    assert [row["id"] for row in rows] == [first.pk, second.pk, third.pk]
    assert rows[0] == {
        "id": first.pk,
        "dag_id": "a",
        "asset": {"id": orders.pk, "name": "orders", "uri": orders.uri, "group": ""},
        "created_at": first.created_at.isoformat().replace("+00:00", "Z"),
    }
    assert ids(api.get(f"{API}/queue", {"dag_id": "b"})) == [third.pk]
    assert ids(api.get(f"{API}/queue", {"asset_id": orders.pk})) == [first.pk, third.pk]
    assert api.get(f"{API}/queue/{first.pk}").status_code == 404  # a list only
