"""One masking rule for variables on every operator face: the admin's form, ``/api/v1/`` and
``/api/v2/`` show a JSON value's sensitive keys (and a sensitive key's whole value) as ``***``,
and a value read there and written back keeps the stored secrets; only a changed value
replaces them."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from assets_app.models import Variable
from assets_app.selectors.secrets import variable_get, variable_value
from assets_app.services.secrets.variables import masked_value_merge, variable_set
from publicapi.auth import user_token_issue

pytestmark = pytest.mark.django_db

SECRET = "sk-live-4f9a1c2e7b"
SETTINGS = {
    "endpoint": "https://api.example.com",
    "api_token": SECRET,
    "retries": 3,
    "accounts": [{"name": "billing", "password": "pw-billing-77"}, {"name": "ops"}],
}
VARIABLES = "/admin/assets_app/variable/"


def _stored(key: str) -> object:
    return json.loads(variable_value(variable_get(key=key)) or "null")


@pytest.mark.parametrize(
    ("key", "value", "stored", "kept"),
    [
        ("api_token", "***", SECRET, SECRET),
        ("api_token", "new-secret", SECRET, "new-secret"),
        (
            "settings",
            json.dumps({"api_token": "***", "x": 2}),
            json.dumps({"api_token": SECRET}),
            json.dumps({"api_token": SECRET, "x": 2}),
        ),
        (
            "settings",
            json.dumps([{"password": "***"}]),
            json.dumps([{"password": "p-12345"}]),
            json.dumps([{"password": "p-12345"}]),
        ),
        ("settings", "***", json.dumps({"a": 1}), "***"),  # not a sensitive key: as written
        (
            "settings",
            json.dumps({"note": "***"}),
            json.dumps({"note": "x"}),
            json.dumps({"note": "***"}),
        ),  # not a sensitive place
    ],
)
def test_masked_value_merge(key, value, stored, kept):
    assert masked_value_merge(key=key, value=value, stored=stored) == kept


def test_the_admin_form_shows_the_masked_value_and_a_save_keeps_the_secrets(admin_client):
    variable_set(key="billing_api", value=json.dumps(SETTINGS))
    pk = Variable.objects.get(key="billing_api").pk

    page = admin_client.get(f"{VARIABLES}{pk}/change/").content.decode()
    shown = page.split('name="value"', 1)[1].split(">", 1)[1].split("</textarea>", 1)[0]
    from html import unescape

    written_back = admin_client.post(
        f"{VARIABLES}{pk}/change/", {"value": unescape(shown).strip("\r\n"), "description": "d"}
    )

    assert SECRET not in page
    assert "pw-billing-77" not in page
    assert written_back.status_code == 302
    assert _stored("billing_api") == SETTINGS


def test_the_admin_form_replaces_a_secret_that_was_changed(admin_client):
    variable_set(key="billing_api", value=json.dumps(SETTINGS))
    pk = Variable.objects.get(key="billing_api").pk
    changed = {**SETTINGS, "api_token": "sk-live-rotated"}

    admin_client.post(f"{VARIABLES}{pk}/change/", {"value": json.dumps(changed)})

    assert _stored("billing_api") == changed


@pytest.fixture
def v1() -> APIClient:
    from rest_framework.authtoken.models import Token

    user = User.objects.create_superuser("ops", "ops@example.com", "pw")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


@pytest.fixture
def v2() -> APIClient:
    user = User.objects.create_superuser("airflow-user", "a@example.com", "pw")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {user_token_issue(user=user)}")
    return client


def test_api_v1_read_then_written_back_keeps_the_secrets(v1):
    variable_set(key="billing_api", value=json.dumps(SETTINGS))
    variable_set(key="db_password", value=SECRET)

    read = v1.get("/api/v1/variables/billing_api").json()
    sensitive = v1.get("/api/v1/variables/db_password").json()
    back = v1.patch("/api/v1/variables/billing_api", {"value": read["value"]}, format="json")
    back_sensitive = v1.patch(
        "/api/v1/variables/db_password", {"value": sensitive["value"]}, format="json"
    )

    assert SECRET not in read["value"]
    assert sensitive["value"] == "***"
    assert (back.status_code, back_sensitive.status_code) == (200, 200)
    assert _stored("billing_api") == SETTINGS
    assert variable_value(variable_get(key="db_password")) == SECRET


def test_api_v2_read_then_written_back_keeps_the_secrets(v2):
    variable_set(key="billing_api", value=json.dumps(SETTINGS))
    variable_set(key="db_password", value=SECRET)

    read = v2.get("/api/v2/variables/billing_api").json()
    sensitive = v2.get("/api/v2/variables/db_password").json()
    back = v2.patch(
        "/api/v2/variables/billing_api",
        {"key": "billing_api", "value": read["value"]},
        format="json",
    )
    back_sensitive = v2.patch(
        "/api/v2/variables/db_password",
        {"key": "db_password", "value": sensitive["value"]},
        format="json",
    )

    assert SECRET not in read["value"]
    assert sensitive["value"] == "***"
    assert (back.status_code, back_sensitive.status_code) == (200, 200), back.json()
    assert _stored("billing_api") == SETTINGS
    assert variable_value(variable_get(key="db_password")) == SECRET
