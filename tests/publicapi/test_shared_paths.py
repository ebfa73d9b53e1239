"""One implementation under both operator faces (issue 22, Deliver 3): ``/api/v1/`` and
``/api/v2/`` reach the same selectors and services, so a rule cannot drift between them.

Each row names a rule's one home and the modules of both faces that use it; the test checks
they hold that very function (not a copy), and that the other face's module has no second
definition. Then both faces answer the same for the same rows (``docs/public-api.md``
lists the shared paths)."""

from __future__ import annotations

import importlib
import inspect
import json

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

import assets_app.selectors.assets
import assets_app.selectors.dags
import assets_app.selectors.runs
import assets_app.selectors.secrets
import assets_app.services.assets.events
import assets_app.services.dags.declare
import assets_app.services.runs.clearing
import assets_app.services.runs.dag_runs
import assets_app.services.secrets.connections
import assets_app.services.secrets.variables
from assets_app.models import AssetActive
from assets_app.services.secrets.connections import ConnectionFields, connection_create
from assets_app.services.secrets.variables import variable_set
from publicapi.auth import user_token_issue
from tests.factories import AssetFactory, DagFactory, DagRunFactory
from tests.publicapi.conftest import Api

SHARED = [
    # (home module, function, modules of /api/v1 and /api/v2 that call it)
    (assets_app.selectors.dags, "dag_list", ["operatorapi.views", "publicapi.views"]),
    (assets_app.selectors.runs, "dag_run_list", ["operatorapi.views", "publicapi.selectors"]),
    (
        assets_app.selectors.assets,
        "asset_is_active",
        ["operatorapi.selectors", "publicapi.filters"],
    ),
    (
        assets_app.selectors.secrets,
        "variable_masked_value",
        ["operatorapi.secrets", "publicapi.secrets"],
    ),
    (
        assets_app.selectors.secrets,
        "connection_masked_password",
        ["operatorapi.secrets", "publicapi.secrets"],
    ),
    (
        assets_app.selectors.secrets,
        "connection_masked_extra",
        ["operatorapi.secrets", "publicapi.secrets"],
    ),
    (
        assets_app.services.assets.events,
        "asset_event_create_manual",
        ["operatorapi.views", "publicapi.views"],
    ),
    (
        assets_app.services.runs.dag_runs,
        "dag_run_trigger",
        ["operatorapi.views", "publicapi.views"],
    ),
    (assets_app.services.dags.declare, "dags_set_paused", ["operatorapi.views", "publicapi.views"]),
    (
        assets_app.services.runs.clearing,
        "task_instances_clear",
        ["operatorapi.views", "publicapi.views"],
    ),
    (
        assets_app.services.runs.clearing,
        "task_instances_select",
        ["operatorapi.views", "publicapi.views"],
    ),
    (
        assets_app.services.secrets.variables,
        "variable_create",
        ["operatorapi.secrets", "publicapi.secrets"],
    ),
    (
        assets_app.services.secrets.variables,
        "variable_set",
        ["operatorapi.secrets", "publicapi.secrets"],
    ),
    (
        assets_app.services.secrets.variables,
        "variable_delete",
        ["operatorapi.secrets", "publicapi.secrets"],
    ),
    (
        assets_app.services.secrets.connections,
        "connection_create",
        ["operatorapi.secrets", "publicapi.secrets"],
    ),
    (
        assets_app.services.secrets.connections,
        "connection_update",
        ["operatorapi.secrets", "publicapi.secrets"],
    ),
    (
        assets_app.services.secrets.connections,
        "connection_delete",
        ["operatorapi.secrets", "publicapi.secrets"],
    ),
]


def _module_functions(module: object) -> dict[str, object]:
    return {name: value for name, value in vars(module).items() if inspect.isfunction(value)}


@pytest.mark.parametrize(
    ("home", "name", "faces"),
    [pytest.param(h, n, f, id=f"{n}") for h, n, f in SHARED],
)
def test_both_faces_call_the_one_home_of_a_rule(home, name, faces):
    rule = getattr(home, name)
    assert rule.__module__ == home.__name__
    for face in faces:
        module = importlib.import_module(face)
        imported = any(v is rule for v in _module_functions(module).values())
        source = inspect.getsource(module)
        via_module = any(
            value is home and f"{alias}.{name}(" in source for alias, value in vars(module).items()
        )
        assert imported or via_module, f"{face} does not use {home.__name__}.{name}"
        own = [k for k, v in _module_functions(module).items() if v.__module__ == face]
        assert name not in own, f"{face} defines its own {name}"


@pytest.fixture
def both_faces(db):
    user = User.objects.create_superuser("ops", "ops@example.com", "pw")
    v1 = APIClient()
    v1.force_authenticate(user)
    return v1, Api(user_token_issue(user=user))


def test_both_faces_mask_secrets_alike(both_faces):
    v1, v2 = both_faces
    variable_set(key="settings", value=json.dumps({"api_key": "k3y", "rows": 5}))
    variable_set(key="db_password", value="pw")
    connection_create(
        conn_id="c",
        values=ConnectionFields(conn_type="http", password="pw", extra='{"token": "t", "n": 1}'),
    )
    for key in ("settings", "db_password"):
        assert (
            v1.get(f"/api/v1/variables/{key}").json()["value"]
            == (v2.get(f"variables/{key}").json()["value"])
        )
    one, two = v1.get("/api/v1/connections/c").json(), v2.get("connections/c").json()
    assert (one["password"], one["extra"]) == (two["password"], two["extra"])
    assert "pw" not in json.dumps([one, two])


def test_both_faces_read_active_assets_alike(both_faces):
    v1, v2 = both_faces
    active = AssetFactory(name="on")
    AssetActive.objects.create(asset=active, name=active.name, uri=active.uri)
    AssetFactory(name="off")
    v1_active = [a["name"] for a in v1.get("/api/v1/assets", {"active": "true"}).json()["results"]]
    v2_active = [a["name"] for a in v2.get("assets").json()["assets"]]
    assert v1_active == v2_active == ["on"]


def test_a_run_marked_through_v2_reads_the_same_on_v1(both_faces):
    v1, v2 = both_faces
    run = DagRunFactory(dag=DagFactory(dag_id="d"), run_id="r", state="running")
    v2.patch("dags/d/dagRuns/r", {"state": "failed"})
    assert v1.get(f"/api/v1/dag-runs/{run.pk}").json()["state"] == "failed"
