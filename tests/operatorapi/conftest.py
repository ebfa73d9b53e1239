"""Fixtures of the operator API tests: users with chosen model permissions and their clients."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.contrib.auth.models import Permission, User
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

#: The read permission of every resource of the API.
VIEW_PERMISSIONS = (
    "view_asset",
    "view_assetalias",
    "view_assetevent",
    "view_dag",
    "view_dagrun",
    "view_assetdagrunqueue",
)
#: An operator: reads everything, creates events, pauses DAGs.
OPERATOR_PERMISSIONS = (*VIEW_PERMISSIONS, "add_assetevent", "change_dag")


def make_user(username: str, *permissions: str, **fields) -> User:
    """A user holding the given ``assets_app`` permissions (by codename)."""
    user = User.objects.create_user(username=username, password="pw", **fields)
    found = Permission.objects.filter(
        content_type__app_label="assets_app", codename__in=permissions
    )
    assert found.count() == len(set(permissions)), permissions
    user.user_permissions.add(*found)
    return user


def token_client(user: User) -> APIClient:
    """A client sending ``Authorization: Token <key>`` for ``user``."""
    token, _ = Token.objects.get_or_create(user=user)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


@pytest.fixture
def client_for() -> Callable[..., APIClient]:
    """``client_for("name", *permissions, **user_fields)``: a token client of a new user."""

    def make(username: str, *permissions: str, **fields) -> APIClient:
        return token_client(make_user(username, *permissions, **fields))

    return make


@pytest.fixture
def api(client_for) -> APIClient:
    """A token client of an operator (view everything, add events, change DAGs)."""
    return client_for("operator", *OPERATOR_PERMISSIONS)
