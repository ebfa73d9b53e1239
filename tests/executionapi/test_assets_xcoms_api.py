"""Asset and asset-event reads, XComs, OpenAPI/docs and the catch-all 404."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from rest_framework.test import APIClient

from assets_app.models import AssetActive, AssetEvent, XCom
from tests.executionapi.conftest import client_for, wire_sample
from tests.factories import AssetAliasFactory, AssetEventFactory, AssetFactory

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def client(make_ti):
    return client_for(make_ti())


@pytest.fixture
def active_asset():
    asset = AssetFactory(
        name="by_name_asset", uri="s3://bucket/by-name", group="asset", extra={"ref": "name"}
    )
    AssetActive.objects.create(asset=asset, name=asset.name, uri=asset.uri)
    return asset


def test_asset_by_name_and_by_uri(client, active_asset):
    by_name = client.get("/execution/assets/by-name", {"name": "by_name_asset"})
    by_uri = client.get("/execution/assets/by-uri", {"uri": "s3://bucket/by-name"})

    assert by_name.status_code == by_uri.status_code == 200
    assert by_name.json() == by_uri.json() == wire_sample("asset_by_name_response")


def test_inactive_or_unknown_asset_is_404(client):
    AssetFactory(name="inactive", uri="s3://inactive")

    response = client.get("/execution/assets/by-name", {"name": "inactive"})

    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert response.json()["detail"]["reason"] == "not_found"


def test_asset_by_name_without_name_is_422(client):
    response = client.get("/execution/assets/by-name")

    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["query", "name"]


@pytest.fixture
def timeline(active_asset):
    events = []
    for minutes in (0, 10, 20, 30):
        event = AssetEventFactory(asset=active_asset, extra={"m": minutes})
        AssetEvent.objects.filter(pk=event.pk).update(timestamp=T0 + timedelta(minutes=minutes))
        events.append(event)
    AssetEventFactory(asset=AssetFactory(name="other", uri="s3://other"))
    return events


def _minutes(response) -> list[int]:
    assert response.status_code == 200, response.content
    return [item["extra"]["m"] for item in response.json()["asset_events"]]


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        pytest.param({"name": "by_name_asset"}, [0, 10, 20, 30], id="name-only"),
        pytest.param({"uri": "s3://bucket/by-name"}, [0, 10, 20, 30], id="uri-only"),
        pytest.param(
            {"name": "by_name_asset", "uri": "s3://bucket/by-name"}, [0, 10, 20, 30], id="both"
        ),
        pytest.param(
            {
                "name": "by_name_asset",
                "after": (T0 + timedelta(minutes=10)).isoformat(),
                "before": (T0 + timedelta(minutes=20)).isoformat(),
            },
            [10, 20],
            id="after-before-inclusive",
        ),
        pytest.param({"name": "by_name_asset", "ascending": "false"}, [30, 20, 10, 0], id="desc"),
        pytest.param({"name": "by_name_asset", "limit": 2}, [0, 10], id="limit"),
        pytest.param(
            {"name": "by_name_asset", "ascending": "false", "limit": 1}, [30], id="latest"
        ),
        pytest.param({"name": "", "uri": "s3://bucket/by-name"}, [0, 10, 20, 30], id="empty-name"),
    ],
)
def test_asset_events_by_asset_filters(client, timeline, params, expected):
    assert _minutes(client.get("/execution/asset-events/by-asset", params)) == expected


def test_asset_events_by_asset_item_shape(client, timeline):
    item = client.get("/execution/asset-events/by-asset", {"name": "by_name_asset"}).json()[
        "asset_events"
    ][0]

    assert set(item) == {
        "id",
        "timestamp",
        "extra",
        "asset",
        "created_dagruns",
        "source_task_id",
        "source_dag_id",
        "source_run_id",
        "source_map_index",
        "partition_key",
    }
    assert item["asset"] == wire_sample("asset_by_name_response")
    assert item["timestamp"] == "2026-01-01T00:00:00Z"


def test_asset_events_by_asset_needs_name_or_uri(client):
    response = client.get("/execution/asset-events/by-asset")

    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    assert response.json()["detail"]["reason"] == "missing_parameter"


def test_asset_events_by_asset_naive_after_is_422(client, timeline):
    response = client.get(
        "/execution/asset-events/by-asset", {"name": "by_name_asset", "after": "2026-01-01T00:00"}
    )

    assert response.status_code == 422


def test_asset_events_with_one_key_need_an_active_asset(client):
    AssetEventFactory(asset=AssetFactory(name="gone", uri="s3://gone"))

    response = client.get("/execution/asset-events/by-asset", {"name": "gone"})

    assert _minutes(response) == []


def test_asset_events_by_asset_alias(client, timeline):
    alias = AssetAliasFactory(name="al")
    for event in timeline[1:3]:
        event.source_aliases.add(alias)

    response = client.get(
        "/execution/asset-events/by-asset-alias", {"name": "al", "ascending": "false"}
    )

    assert _minutes(response) == [20, 10]


# --- xcoms ------------------------------------------------------------------------------------


def test_xcom_set_and_get_with_unencoded_run_id(make_ti):
    ti = make_ti()
    ti.dag_run.run_id = ti.run_id = "manual__2026-01-01T00:00:00+00:00"
    ti.dag_run.save()
    ti.save()
    client = client_for(ti)
    url = (
        f"/execution/xcoms/{ti.dag_id}/manual__2026-01-01T00:00:00+00:00/{ti.task_id}/return_value"
    )

    posted = client.post(url, wire_sample("xcom_return_value"), format="json")
    again = client.post(url + "?map_index=-1", {"answer": 43}, format="json")
    read = client.get(url)

    assert (posted.status_code, again.status_code) == (201, 201)
    assert read.status_code == 200
    assert read.json() == {"key": "return_value", "value": {"answer": 43}}
    assert XCom.objects.get().run_id == "manual__2026-01-01T00:00:00+00:00"


def test_xcom_map_index_and_missing(make_ti):
    ti = make_ti()
    client = client_for(ti)
    url = f"/execution/xcoms/{ti.dag_id}/{ti.run_id}/{ti.task_id}/k"

    assert client.post(url + "?map_index=3", 7, format="json").status_code == 201
    assert client.get(url, {"map_index": 3}).json() == {"key": "k", "value": 7}
    assert client.head(url)["Content-Range"] == "map_indexes 1"
    missing = client.get(url)
    assert missing.status_code == 404
    assert missing.json()["detail"]["reason"] == "not_found"
    assert client.delete(url + "?map_index=3").status_code == 200
    assert not XCom.objects.exists()


def test_xcom_for_unknown_run_is_404(client):
    response = client.post("/execution/xcoms/nodag/norun/t/k", 1, format="json")

    assert response.status_code == 404


@pytest.mark.parametrize(
    ("path", "loc"),
    [
        pytest.param("{dag}/{run}/{task}/" + "k" * 513, ["path", "key"], id="key-too-long"),
        pytest.param("{dag}/{run}/" + "t" * 251 + "/k", ["path", "task_id"], id="task-too-long"),
        pytest.param("{dag}/{run}/{task}/k?map_index=2147483648", ["query", "map_index"], id="map"),
        pytest.param("{dag}/{run}/{task}/k?map_index=-2", ["query", "map_index"], id="map-neg"),
    ],
)
def test_xcom_set_with_values_beyond_the_columns_is_422(make_ti, path, loc):
    ti = make_ti()
    url = "/execution/xcoms/" + path.format(dag=ti.dag_id, run=ti.run_id, task=ti.task_id)

    response = client_for(ti).post(url, 1, format="json")

    assert response.status_code == 422, response.content
    assert loc in [error["loc"] for error in response.json()["detail"]]
    assert not XCom.objects.exists()


def test_xcom_value_with_a_nul_character_is_422(make_ti):
    ti = make_ti()
    url = f"/execution/xcoms/{ti.dag_id}/{ti.run_id}/{ti.task_id}/k"

    response = client_for(ti).post(url, {"v": "\x00"}, format="json")

    assert response.status_code == 422, response.content
    assert not XCom.objects.exists()


# --- schema, docs, catch-all ------------------------------------------------------------------


def test_openapi_schema_describes_every_route():
    response = APIClient().get("/execution/openapi.json")

    assert response.status_code == 200
    schema = response.json()
    assert schema["openapi"].startswith("3.")
    paths = set(schema["paths"])
    assert {
        "/execution/task-instances/{task_instance_id}/state",
        "/execution/task-instances/{task_instance_id}/run",
        "/execution/task-instances/{task_instance_id}/heartbeat",
        "/execution/task-instances/{task_instance_id}/rtif",
        "/execution/task-instances/{task_instance_id}/validate-inlets-and-outlets",
        "/execution/assets/by-name",
        "/execution/assets/by-uri",
        "/execution/asset-events/by-asset",
        "/execution/asset-events/by-asset-alias",
        "/execution/xcoms/{dag_id}/{run_id}/{task_id}/{key}",
    } <= paths
    components = schema["components"]["schemas"]
    assert "TIStatePayload" in components
    assert "TISuccessStatePayload" in components
    assert schema["components"]["securitySchemes"]["TaskRunnerToken"]["scheme"] == "bearer"


def test_browsable_docs_are_served_without_a_cdn():
    response = APIClient().get("/execution/docs")

    assert response.status_code == 200
    assert b"/static/drf_spectacular_sidecar/swagger-ui-dist/" in response.content


@pytest.mark.parametrize("method", ["get", "post", "put", "patch", "delete"])
def test_unknown_execution_paths_are_json_404(method):
    response = getattr(APIClient(), method)("/execution/no/such/route")

    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert response.json()["detail"]["reason"] == "not_found"


def test_wrong_method_is_json_405():
    # a token for this very TI: otherwise the sub check answers 403 before the method is seen
    ti_id = "0195e0b8-0000-7000-8000-000000000000"

    response = client_for(ti_id).get(f"/execution/task-instances/{ti_id}/state")

    assert response.status_code == 405
    assert response["Content-Type"] == "application/json"
    assert response.json()["detail"]["reason"] == "method_not_allowed"
