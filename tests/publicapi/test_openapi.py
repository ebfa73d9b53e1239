"""``/api/v2/openapi.json`` is Airflow 3.3.2's document for the routes served."""

from __future__ import annotations

import json
from pathlib import Path

import airflow.api_fastapi.core_api as core_api
import pytest
import yaml
from django.urls import resolve

from publicapi.schema import (
    BY_KEY_BODY,
    EXTRA_RESPONSES,
    NO_TEAM_BODIES,
    SCHEMA_FILE,
    SERVED,
    openapi_build,
)

AIRFLOW = yaml.safe_load(
    (Path(core_api.__file__).parent / "openapi" / "v2-rest-api-generated.yaml").read_text()
)


@pytest.fixture
def served(client) -> dict:
    response = client.get("/api/v2/openapi.json")
    assert response.status_code == 200
    return response.json()


def test_the_kept_document_is_cut_from_the_installed_airflows():
    assert json.loads(SCHEMA_FILE.read_text()) == openapi_build(AIRFLOW)


def test_every_schema_is_airflows(served):
    ours = served["components"]["schemas"]
    assert ours.pop("CreateAssetEventsByKeyBody") == BY_KEY_BODY
    clear = ours.pop("ClearTaskInstanceCollectionResponse")
    theirs = AIRFLOW["components"]["schemas"]["ClearTaskInstanceCollectionResponse"]
    items = clear["properties"]["task_instances"]["items"]
    assert items["anyOf"] == theirs["properties"]["task_instances"]["items"]["oneOf"]
    for name in NO_TEAM_BODIES:  # team_name is null only; the rest is Airflow's
        body, theirs = ours.pop(name), AIRFLOW["components"]["schemas"][name]
        assert body["properties"].pop("team_name") == {
            "type": "null",
            "title": "Team Name",
            "description": "Always null: the registry has no teams (multi_team off).",
        }
        assert body["properties"] == {
            k: v for k, v in theirs["properties"].items() if k != "team_name"
        }
        assert {k: v for k, v in body.items() if k != "properties"} == {
            k: v for k, v in theirs.items() if k != "properties"
        }
    for name, schema in ours.items():
        assert schema == AIRFLOW["components"]["schemas"][name], name


def test_operations_keep_airflows_parameters_and_responses(served):
    for route, methods in served["paths"].items():
        for method, operation in methods.items():
            theirs = AIRFLOW["paths"][route][method]
            assert operation["operationId"] == theirs["operationId"]
            their_params = {(p["name"], p["in"]): p for p in theirs.get("parameters", [])}
            for param in operation.get("parameters", []):
                assert param == their_params[(param["name"], param["in"])]
            path_params = {k for k in their_params if k[1] == "path"}
            assert path_params <= {(p["name"], p["in"]) for p in operation.get("parameters", [])}
            extra = EXTRA_RESPONSES.get((route, method), {})
            for code, response in operation["responses"].items():
                if code in extra and code not in theirs["responses"]:
                    continue
                if (route, method) == ("/api/v2/assets/events", "post") and code == "200":
                    continue
                assert response == theirs["responses"][code], (route, method, code)
            assert set(theirs["responses"]) <= set(operation["responses"])
    body = served["paths"]["/api/v2/assets/events"]["post"]["requestBody"]
    refs = body["content"]["application/json"]["schema"]["anyOf"]
    assert {"$ref": "#/components/schemas/CreateAssetEventsBody"} in refs


def test_every_documented_route_is_routed():
    for route in SERVED:
        path = route.replace("{dag_id}", "d").replace("{dag_run_id}", "r")
        for name in ("asset_id", "asset_alias_id", "task_id", "xcom_key", "map_index"):
            path = path.replace("{" + name + "}", "1")
        match = resolve(path)
        assert match.url_name != "not-found", route


def test_the_swagger_ui_reads_the_served_document_without_a_cdn(client):
    response = client.get("/api/v2/docs")

    assert response.status_code == 200
    assert b"/static/drf_spectacular_sidecar/swagger-ui-dist/" in response.content
    assert b"/api/v2/openapi.json" in response.content
    assert b"cdn." not in response.content


ROUTES_BEGIN = "<!-- BEGIN served routes"
ROUTES_END = "<!-- END served routes -->"


def served_routes_markdown() -> str:
    """Every route ``/api/v2/`` serves, as docs/api-v2.md lists them: the document's routes
    (``SERVED``) and the document and its UI themselves."""
    lines = ["- `GET /api/v2/openapi.json`", "- `GET /api/v2/docs`"]
    for route, methods in SERVED.items():
        lines += [f"- `{method.upper()} {route}`" for method in methods]
    return "\n".join(lines) + "\n"


def test_the_docs_list_every_served_route_and_no_other():
    text = (Path(__file__).resolve().parents[2] / "docs" / "api-v2.md").read_text()
    start = text.index("\n", text.index(ROUTES_BEGIN)) + 1
    listed = text[start : text.index(ROUTES_END)].strip("\n") + "\n"

    assert listed == served_routes_markdown(), (
        "docs/api-v2.md's route list differs from the routes served; the list should read:\n"
        + served_routes_markdown()
    )
    for line in listed.splitlines():  # and each is routed
        path = line.split()[-1].rstrip("`")
        concrete = path.replace("{map_index}", "0").replace("{", "").replace("}", "")
        assert resolve(concrete).url_name != "not-found", line
