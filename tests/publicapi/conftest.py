from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.test import Client

from publicapi.auth import user_token_issue

READ_PERMISSIONS = [
    f"view_{model}"
    for model in (
        "asset",
        "assetalias",
        "assetevent",
        "assetdagrunqueue",
        "dag",
        "dagrun",
        "eventlog",
        "taskinstance",
        "xcom",
    )
]


class Api:
    """A Django test client sending a user's bearer JWT, JSON in and out."""

    def __init__(self, token: str | None) -> None:
        self.client = Client()
        self.headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token else {}

    def get(self, path: str, params: dict[str, Any] | None = None) -> Any:
        return self.client.get(f"/api/v2/{path}", params or {}, **self.headers)

    def _send(self, method: str, path: str, body: Any) -> Any:
        send = getattr(self.client, method)
        data = body if isinstance(body, (bytes, str)) else json.dumps(body)
        return send(f"/api/v2/{path}", data, content_type="application/json", **self.headers)

    def post(self, path: str, body: Any = None) -> Any:
        return self._send("post", path, body if body is not None else {})

    def patch(self, path: str, body: Any) -> Any:
        return self._send("patch", path, body)

    def delete(self, path: str) -> Any:
        return self.client.delete(f"/api/v2/{path}", **self.headers)


@pytest.fixture
def admin_api(db) -> Api:
    user = User.objects.create_superuser("admin", "admin@example.com", "pw")
    return Api(user_token_issue(user=user))


@pytest.fixture
def reader_api(db) -> Api:
    """A user of a group holding only the ``view_*`` permissions."""
    group = Group.objects.create(name="readers")
    group.permissions.set(
        Permission.objects.filter(
            content_type__app_label="assets_app", codename__in=READ_PERMISSIONS
        )
    )
    user = User.objects.create_user("reader", password="pw")
    user.groups.add(group)
    return Api(user_token_issue(user=user))


@pytest.fixture
def anonymous_api(db) -> Api:
    return Api(None)
