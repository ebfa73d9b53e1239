"""The admin's variables and connections: writes through the services, secrets kept when a
form leaves them blank, bad input as form errors with nothing written."""

from __future__ import annotations

import pytest

from assets_app.models import Connection, Variable
from assets_app.selectors.secrets import (
    connection_get,
    connection_secrets,
    variable_get,
    variable_value,
)
from assets_app.services.secrets.connections import ConnectionFields, connection_create
from assets_app.services.secrets.variables import variable_set

pytestmark = pytest.mark.django_db

VARIABLES = "/admin/assets_app/variable/"
CONNECTIONS = "/admin/assets_app/connection/"


def test_variable_form_shows_a_plain_value_and_hides_a_sensitive_one(admin_client):
    variable_set(key="greeting", value="hello-shown")
    variable_set(key="api_token", value="token-hidden-value")
    plain = Variable.objects.get(key="greeting")
    hidden = Variable.objects.get(key="api_token")

    plain_page = admin_client.get(f"{VARIABLES}{plain.pk}/change/").content.decode()
    hidden_page = admin_client.get(f"{VARIABLES}{hidden.pk}/change/").content.decode()
    saved = admin_client.post(f"{VARIABLES}{hidden.pk}/change/", {"description": "rotated"})

    assert "hello-shown" in plain_page
    assert "token-hidden-value" not in hidden_page
    assert saved.status_code == 302
    assert variable_value(variable_get(key="api_token")) == "token-hidden-value"  # kept
    assert variable_get(key="api_token").description == "rotated"


def test_connection_form_refuses_bad_extra_and_keeps_or_clears_secrets(admin_client):
    connection_create(
        conn_id="c",
        values=ConnectionFields(conn_type="http", password="kept-pass", extra='{"a": 1}'),
    )
    pk = Connection.objects.get().pk
    url = f"{CONNECTIONS}{pk}/change/"

    bad = admin_client.post(url, {"conn_type": "http", "extra": "[1, 2]"})
    bad_port = admin_client.post(url, {"conn_type": "http", "port": "70000"})
    cleared = admin_client.post(url, {"conn_type": "http", "clear_password": "on"})

    assert bad.status_code == 200  # the form again, with its error
    assert "extra must be a JSON object" in bad.content.decode()
    assert bad_port.status_code == 200
    assert cleared.status_code == 302
    secrets = connection_secrets(connection_get(conn_id="c"))
    assert (secrets.password, secrets.extra) == (None, '{"a": 1}')


def test_connection_add_refuses_a_bad_conn_id_and_deletes_through_the_service(admin_client):
    bad = admin_client.post(f"{CONNECTIONS}add/", {"conn_id": "a b", "conn_type": "x"})
    assert bad.status_code == 200
    assert "conn_id may hold only" in bad.content.decode()
    assert not Connection.objects.exists()

    connection_create(conn_id="gone", values=ConnectionFields(conn_type="x"))
    pk = Connection.objects.get().pk
    deleted = admin_client.post(f"{CONNECTIONS}{pk}/delete/", {"post": "yes"})
    assert deleted.status_code == 302
    assert not Connection.objects.exists()
