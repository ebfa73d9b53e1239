"""The OpenAPI schema and docs, the routing: JSON 404 for unknown paths, 405, no redirects."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tests.executionapi.conftest import client_for

pytestmark = pytest.mark.django_db


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


@pytest.fixture(scope="module")
def schema():
    return APIClient().get("/execution/openapi.json").json()


def test_openapi_schema_is_valid_openapi_3(schema):
    jsonschema = pytest.importorskip("jsonschema", reason="installed with the airflow extra")
    from drf_spectacular.validation import validate_schema

    try:
        validate_schema(schema)  # type: ignore[no-untyped-call]  # drf-spectacular's, untyped
    except jsonschema.ValidationError as exc:  # pragma: no cover - the message is the point
        pytest.fail(f"invalid OpenAPI schema: {exc.message} at {list(exc.absolute_path)}")


def test_openapi_schema_describes_the_state_payloads_by_state(schema):
    components = schema["components"]["schemas"]
    body = schema["paths"]["/execution/task-instances/{task_instance_id}/state"]["patch"]
    ref = body["requestBody"]["content"]["application/json"]["schema"]["$ref"]

    assert ref == "#/components/schemas/TIStatePayload"
    mapping = components["TIStatePayload"]["discriminator"]["mapping"]
    assert set(mapping) == {
        "success",
        "failed",
        "skipped",
        "removed",
        "upstream_failed",
        "up_for_retry",
        "up_for_reschedule",
        "deferred",
    }
    success = components["TISuccessStatePayload"]
    assert success["additionalProperties"] is False  # unknown keys are 422s
    assert set(success["required"]) == {"state", "end_date"}
    assert success["properties"]["task_outlets"]["items"] == {
        "$ref": "#/components/schemas/AssetProfile"
    }


def test_openapi_schema_describes_the_three_outlet_event_shapes(schema):
    components = schema["components"]["schemas"]
    events = components["TISuccessStatePayload"]["properties"]["outlet_events"]

    assert events["type"] == "array"
    assert events["nullable"] is True
    assert events["items"] == {"$ref": "#/components/schemas/OutletEvent"}
    shapes = {item["$ref"].rsplit("/", 1)[1] for item in components["OutletEvent"]["oneOf"]}
    assert shapes == {"AssetOutletEvent", "AliasOutletEvent", "SeedOutletEventAccessor"}
    alias = components["AliasOutletEvent"]
    assert alias["additionalProperties"] is False
    assert set(alias["required"]) == {"source_alias_name", "dest_asset_key"}
    assert alias["properties"]["dest_asset_key"] == {"$ref": "#/components/schemas/AssetKey"}
    assert alias["properties"]["partition_key"] == {
        "type": "string",
        "nullable": True,
        "maxLength": 250,
        "minLength": 1,
        "pattern": "^[^\\u0000]*$",  # no U+0000: a 422
    }
    assert components["AssetKey"]["required"] == ["name", "uri"]
    accessor = components["SeedOutletEventAccessor"]["properties"]
    assert accessor["asset_alias_events"]["items"] == {
        "$ref": "#/components/schemas/AliasOutletEvent"
    }


def test_openapi_schema_describes_every_answer(schema):
    operations = [
        (path, method, operation)
        for path, item in schema["paths"].items()
        for method, operation in item.items()
    ]
    # 12; variables get/put/delete/keys, connections get; by-alias, previous-successful-dagrun,
    # task-reschedules start_date, skip-downstream; health, health/ping; task-instances count,
    # states, breadcrumbs, previous; xcom slice, item; dag-runs get, trigger, clear, state,
    # count, previous; dags get; the task state store's 4 and the asset state store's 8; a
    # try's log, get and post (the registry's); a mapped task instance's rendered-map-index
    assert len(operations) == 51
    for path, method, operation in operations:
        responses = operation["responses"]
        if path.startswith("/execution/health"):  # no token, no input (as in Airflow)
            assert "security" not in operation, (path, method)
        else:
            assert {"401", "403", "422"} <= set(responses), (path, method)
        assert "414" in responses, (path, method)  # gunicorn's, before the app
        if "requestBody" in operation:
            assert operation["requestBody"]["required"] is True, (path, method)
            assert {"413", "415"} <= set(responses), (path, method)
        for code, response in responses.items():
            if code == "204":
                assert "content" not in response, (path, method)
            elif code == "414":
                assert set(response["content"]) == {"text/html"}, (path, method)
            else:
                assert response["content"]["application/json"]["schema"], (path, method, code)
    run = schema["paths"]["/execution/task-instances/{task_instance_id}/run"]["patch"]
    context = schema["components"]["schemas"]["TIRunContext"]
    assert run["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/TIRunContext"
    }
    assert set(context["required"]) >= {"dag_run", "max_tries", "should_retry"}


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


def test_a_task_instance_id_that_is_not_a_uuid_is_the_json_404():
    response = client_for("not-a-uuid").patch(
        "/execution/task-instances/not-a-uuid/state", {"state": "failed"}, format="json"
    )

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
