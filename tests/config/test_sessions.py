"""A session cookie no Django session key looks like is no session: never a 500, on either
database (on PostgreSQL a NUL in the key used to reach the query and fail)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("key", ['"abcdefghij\\000k"', "abcdefghijKLMNOP", "short"])
def test_a_malformed_session_cookie_is_not_logged_in(key: str) -> None:
    client = Client(HTTP_COOKIE=f"sessionid={key}")
    response = client.get("/admin/")
    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]


def test_a_real_session_still_logs_in() -> None:
    client = Client()
    user = get_user_model().objects.create_superuser("admin", password="x" * 12)
    client.force_login(user)
    assert client.get("/admin/").status_code == 200
