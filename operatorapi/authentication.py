"""Who may call the operator API: Django users, by DRF token or by admin session.

A token or session cookie holding U+0000 is no credential (it is never looked up).
A task runner's bearer JWT belongs to the execution API; here it is refused with a 401 that
says so, instead of being silently ignored.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.http import HttpRequest
from drf_spectacular.authentication import SessionScheme
from rest_framework import exceptions
from rest_framework.authentication import (
    BaseAuthentication,
    SessionAuthentication,
    TokenAuthentication,
    get_authorization_header,
)
from rest_framework.authtoken.models import Token
from rest_framework.request import Request

from operatorapi.params import has_nul


class UserTokenAuthentication(TokenAuthentication):
    """``Authorization: Token <key>`` (DRF ``authtoken``; ``manage.py drf_create_token USER``)."""

    def authenticate(self, request: Request) -> tuple[AbstractBaseUser, Token] | None:
        parts = get_authorization_header(request).split()
        if parts and parts[0].lower() == b"bearer":
            raise exceptions.AuthenticationFailed(
                "Bearer tokens (task runner JWTs) are for the execution API; "
                "send 'Authorization: Token <key>' with a user's API token",
                code="bearer_not_accepted",
            )
        result: Any = super().authenticate(request)
        return result  # type: ignore[no-any-return]

    def authenticate_credentials(self, key: str) -> tuple[AbstractBaseUser, Token]:
        if has_nul(key):  # no key holds one; PostgreSQL would refuse to compare it
            raise exceptions.AuthenticationFailed("Invalid token.", code="authentication_failed")
        result: Any = super().authenticate_credentials(key)
        return result  # type: ignore[no-any-return]


def _session_key_storable(request: HttpRequest) -> bool:
    """Whether the session cookie, if any, can be looked up (holds no U+0000)."""
    return not has_nul(request.COOKIES.get(settings.SESSION_COOKIE_NAME))


def session_user_logged_in(request: Request | HttpRequest | None) -> bool:
    """Whether the request comes with the admin session of a logged-in user."""
    if request is None:
        return False
    django_request = getattr(request, "_request", request)
    if not _session_key_storable(django_request):
        return False
    user = getattr(django_request, "user", None)
    return bool(user is not None and user.is_authenticated and user.is_active)


class UserSessionAuthentication(SessionAuthentication):
    """The admin's session; a session cookie holding U+0000 (``"\\000"`` in a quoted cookie
    value) names no session and is ignored, rather than looked up."""

    def authenticate(self, request: Request) -> tuple[AbstractBaseUser, None] | None:
        if not _session_key_storable(request._request):
            return None
        result: Any = super().authenticate(request)
        return result  # type: ignore[no-any-return]


#: In the order DRF tries them; the first one's keyword goes in ``WWW-Authenticate`` on a 401.
AUTHENTICATION_CLASSES: list[type[BaseAuthentication]] = [
    UserTokenAuthentication,
    UserSessionAuthentication,
]


class UserSessionScheme(SessionScheme):  # type: ignore[no-untyped-call]  # drf-spectacular registry hook
    """In the OpenAPI schema, the admin's session cookie (as DRF's session authentication)."""

    target_class = "operatorapi.authentication.UserSessionAuthentication"
