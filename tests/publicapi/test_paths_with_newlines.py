"""A path holding a newline (or any control character) is answered in JSON like any other: a
pool or variable looked up and not found, an unknown route FastAPI's 404 — never Django's HTML
page (schemathesis found it with more examples than ``make test`` runs)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("path", "detail"),
    [
        ("pools/%0Aetl%0D", "The Pool with name: `\netl\r` was not found"),
        ("variables/%0Akey", "The Variable with key: `\nkey` was not found"),
    ],
)
def test_a_name_with_a_newline_is_looked_up(admin_api, path, detail):
    response = admin_api.get(path)

    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"detail": detail}


@pytest.mark.parametrize("prefix", ["/api/v2/", "/api/v1/"])
def test_an_unknown_path_with_a_newline_is_a_json_404(admin_client, prefix):
    response = admin_client.get(f"{prefix}no/such%0Aroute")

    assert response.status_code == 404
    assert response["Content-Type"].startswith("application/json")
