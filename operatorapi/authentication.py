"""Who may call the operator API: Django users, by DRF token or by admin session.

A task runner's bearer JWT belongs to the execution API; here it is refused with a 401 that
says so, instead of being silently ignored.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from rest_framework import exceptions
from rest_framework.authentication import (
    BaseAuthentication,
    SessionAuthentication,
    TokenAuthentication,
    get_authorization_header,
)
from rest_framework.authtoken.models import Token
from rest_framework.request import Request


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


#: In the order DRF tries them; the first one's keyword goes in ``WWW-Authenticate`` on a 401.
AUTHENTICATION_CLASSES: list[type[BaseAuthentication]] = [
    UserTokenAuthentication,
    SessionAuthentication,
]
