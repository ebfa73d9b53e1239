"""Tests of ``assets_app.admin``, one module per admin area; shared helpers here."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "dags.yaml"

#: Every list page of the registry's admin (model names).
ADMIN_MODELS = (
    "asset",
    "assetalias",
    "assetaliasasset",
    "assetevent",
    "assetaliasassetevent",
    "dag",
    "dagrun",
    "taskinstance",
    "assetdagrunqueue",
    "eventlog",
)


def changelist(model: str) -> str:
    return reverse(f"admin:assets_app_{model}_changelist")


def change(model: str, pk: object) -> str:
    return reverse(f"admin:assets_app_{model}_change", args=[pk])


def page_text(client: Any, url: str, params: dict[str, Any] | None = None) -> str:
    """A page's HTML without the markup that cuts ids and timestamps into unbreakable parts
    (``assets_app.admin.common.ident``, ``when``), so that an id reads as one string."""
    response = client.get(url, params or {})
    assert response.status_code == 200
    html = response.content.decode().replace("<wbr>", "")
    return _ID_PART.sub(r"\1", html)


_ID_PART = re.compile(r'<span class="ar-idp">([^<]*)</span>')


def listed(client: Any, model: str, params: dict[str, Any]) -> set[Any]:
    """The primary keys of the rows the changelist of ``model`` shows for ``params``."""
    response = client.get(changelist(model), params)
    assert response.status_code == 200
    return {row.pk for row in response.context["cl"].result_list}


def query_count(client: Any, url: str) -> int:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response.status_code == 200
    return len(queries)


def assert_query_count_does_not_grow(client: Any, model: str, make: Any) -> int:
    """The changelist of ``model`` runs as many queries with 100 rows as with 10; returns it."""
    # given
    url = changelist(model)
    make(10)
    client.get(url)  # warm caches (content types, session)
    few = query_count(client, url)

    # when
    make(90)
    many = query_count(client, url)

    # then
    assert many == few
    return many
