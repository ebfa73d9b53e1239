"""The operator API's OpenAPI schema: valid, complete, this API alone; and its docs page."""

from __future__ import annotations

import re

import pytest
from django.urls import URLPattern
from drf_spectacular.drainage import GENERATOR_STATS
from drf_spectacular.validation import validate_schema
from rest_framework.test import APIClient

from operatorapi.urls import router

pytestmark = pytest.mark.django_db

#: The operations each viewset method serves, as the router maps them.
METHODS = {
    "list": "get",
    "retrieve": "get",
    "create": "post",
    "update": "put",
    "partial_update": "patch",
    "destroy": "delete",
}

#: The extra actions (``@action``) and their method.
EXTRA_ACTIONS = {"clear": "post", "trigger": "post"}


def routed_operations() -> set[tuple[str, str]]:
    """(path, method) of every route the router serves, derived from its URL patterns."""
    operations = {("/api/v1/", "get")}
    for pattern in router.urls:
        assert isinstance(pattern, URLPattern)
        actions = getattr(pattern.callback, "actions", None)
        if not actions:
            continue  # the API root, added above
        regex = pattern.pattern.regex.pattern  # e.g. ^dags/(?P<dag_id>[^/]+)$
        path = "/api/v1/" + re.sub(r"\(\?P<[^>]+>[^)]+\)", "{}", regex.strip("^$"))
        for method, action in actions.items():
            if method != "head":
                assert METHODS.get(action, EXTRA_ACTIONS.get(action)) == method
                operations.add((path, method))
    return operations


@pytest.fixture(scope="module")
def schema(django_db_blocker):
    with django_db_blocker.unblock():
        GENERATOR_STATS.reset()
        response = APIClient().get("/api/v1/openapi.json")
        warnings = bool(GENERATOR_STATS)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/vnd.oai.openapi+json")
    return response.json(), warnings


def test_schema_is_valid_openapi_and_generated_without_warnings(schema):
    document, warnings = schema

    validate_schema(document)  # raises on an invalid document
    assert document["openapi"].startswith("3.")
    assert document["info"]["title"] == "Asset registry operator API"
    assert not warnings, "drf-spectacular warned while generating the schema (see the log)"


def test_schema_has_every_operation_and_nothing_else(schema):
    document, _ = schema
    documented = {
        (re.sub(r"{[^}]+}", "{}", path), method)
        for path, operations in document["paths"].items()
        for method in operations
        if method in {"get", "post", "put", "patch", "delete"}
    }

    assert documented == routed_operations()
    assert ("/api/v1/asset-events", "post") in documented
    assert ("/api/v1/dags/{}", "patch") in documented
    assert ("/api/v1/dags/{}/runs", "post") in documented
    assert "/api/v1/dags/{dag_id}" in document["paths"]
    assert "/api/v1/asset-events/{id}" in document["paths"]


def test_schema_describes_auth_filters_pagination_and_bodies(schema):
    document, _ = schema
    schemes = document["components"]["securitySchemes"]
    events = document["paths"]["/api/v1/asset-events"]

    assert schemes["tokenAuth"] == {
        "type": "apiKey",
        "in": "header",
        "name": "Authorization",
        "description": 'Token-based authentication with required prefix "Token"',
    }
    assert schemes["cookieAuth"]["in"] == "cookie"
    parameters = {p["name"]: p["schema"] for p in events["get"]["parameters"]}
    assert parameters["after"] == {"type": "string", "format": "date-time"}
    assert parameters["asset_id"]["type"] == "integer"
    assert parameters["page_size"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": 1000,
        "default": 100,
    }
    assert "cursor" in parameters
    runs = {p["name"]: p for p in document["paths"]["/api/v1/dag-runs"]["get"]["parameters"]}
    assert runs["state"]["schema"]["type"] == "array"
    assert runs["state"]["schema"]["items"]["enum"] == ["failed", "queued", "running", "success"]
    dags = {p["name"]: p for p in document["paths"]["/api/v1/dags"]["get"]["parameters"]}
    assert dags["is_paused"]["schema"] == {"type": "boolean"}
    body = events["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    create = document["components"]["schemas"][body.rsplit("/", 1)[1]]
    assert set(create["properties"]) == {"name", "uri", "extra", "partition_key"}
    page = events["get"]["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    assert set(document["components"]["schemas"][page.rsplit("/", 1)[1]]["properties"]) == {
        "next",
        "previous",
        "results",
    }


def test_the_execution_api_schema_leaves_the_operator_api_out():
    response = APIClient().get("/execution/openapi.json")

    paths = set(response.json()["paths"])
    assert paths
    assert all(path.startswith("/execution/") for path in paths)


def test_docs_are_served_without_a_cdn():
    response = APIClient().get("/api/v1/docs")

    assert response.status_code == 200
    assert b"/static/drf_spectacular_sidecar/swagger-ui-dist/" in response.content
    assert b"/api/v1/openapi.json" in response.content
    assert b"cdn." not in response.content
