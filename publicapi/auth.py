"""Who may call the public API: Django users, by a JWT from ``POST /auth/token``.

The token is Airflow's simple auth manager's: ``{"access_token": <JWT>}`` for a user's
username and password, sent back as ``Authorization: Bearer <JWT>``. It is signed with the
registry's JWT secret but carries its own audience and issuer (``PUBLIC_API_AUDIENCE``,
``PUBLIC_API_ISSUER``), so a task runner's token (execution API audience) is refused here and a
user's token is refused by the execution API (wrong audience).
"""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import jwt
from django.contrib.auth import authenticate, get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.request import Request

from assets_app.edge.errors import PayloadTooLarge
from assets_app.tokens import ALGORITHM, signing_secret
from publicapi.exceptions import Unprocessable
from publicapi.params import Body, Text, body_parse

logger = logging.getLogger(__name__)

AUDIENCE = "urn:asset-registry:public-api"
ISSUER = "asset-registry"
#: Airflow's ``[api_auth] jwt_expiration_time`` default (24 h); the CLI token's, one hour
TTL_SECONDS = 24 * 3600
CLI_TTL_SECONDS = 3600


def user_token_issue(*, user: AbstractBaseUser, ttl_seconds: int = TTL_SECONDS) -> str:
    now = datetime.now(tz=UTC)
    claims = {
        "sub": str(user.pk),
        "aud": AUDIENCE,
        "iss": ISSUER,
        "iat": int(now.timestamp()),
        "nbf": int(now.timestamp()),
        "exp": int((now + timedelta(seconds=ttl_seconds)).timestamp()),
        "jti": uuid.uuid4().hex,
    }
    return jwt.encode(claims, signing_secret(), algorithm=ALGORITHM)


def user_token_decode(token: str) -> AbstractBaseUser:
    """The active user a token is for; ``AuthenticationFailed`` saying why not."""
    try:
        claims = jwt.decode(
            token,
            signing_secret(),
            algorithms=[ALGORITHM],
            audience=AUDIENCE,
            issuer=ISSUER,
            options={"require": ["sub", "aud", "iss", "exp", "iat"]},
        )
    except jwt.ExpiredSignatureError as exc:
        raise exceptions.AuthenticationFailed("Token has expired") from exc
    except jwt.PyJWTError as exc:
        logger.info("rejected public API token: %s", exc)
        raise exceptions.AuthenticationFailed("Invalid JWT token") from exc
    model = get_user_model()
    try:  # a token signed with the right secret but naming no possible user id
        user_id = model._meta.pk.to_python(claims["sub"])
    except (ValidationError, TypeError) as exc:
        raise exceptions.AuthenticationFailed("Invalid JWT token") from exc
    user = model.objects.filter(pk=user_id, is_active=True).first()
    if user is None:
        raise exceptions.AuthenticationFailed("Invalid JWT token")
    return user


class BearerAuthentication(BaseAuthentication):
    """``Authorization: Bearer <JWT>`` from ``/auth/token``; nothing else."""

    def authenticate(self, request: Request) -> tuple[AbstractBaseUser, str] | None:
        parts = get_authorization_header(request).split()
        if not parts:
            return None
        if parts[0].lower() != b"bearer" or len(parts) != 2:
            raise exceptions.AuthenticationFailed("Not authenticated")
        try:
            token = parts[1].decode("ascii")
        except UnicodeDecodeError as exc:
            raise exceptions.AuthenticationFailed("Invalid JWT token") from exc
        return user_token_decode(token), token

    def authenticate_header(self, request: Request) -> str:
        return "Bearer"


class LoginBody(Body):
    username: Text
    password: Text


def _login(request: HttpRequest, *, ttl_seconds: int) -> JsonResponse:
    try:
        body = body_parse(LoginBody, request)
    except Unprocessable as exc:
        return JsonResponse({"detail": exc.errors}, status=422)
    except PayloadTooLarge as exc:
        return JsonResponse({"detail": str(exc.detail)}, status=exc.status_code)
    user = authenticate(request, username=body.username, password=body.password)
    if user is None or not user.is_active:
        return JsonResponse({"detail": "Invalid credentials"}, status=401)
    return JsonResponse(
        {"access_token": user_token_issue(user=user, ttl_seconds=ttl_seconds)}, status=201
    )


@csrf_exempt
@require_POST
def token(request: HttpRequest, *args: Any) -> JsonResponse:
    """``POST /auth/token``: Airflow's simple auth manager's login for API clients."""
    return _login(request, ttl_seconds=TTL_SECONDS)


@csrf_exempt
@require_POST
def token_cli(request: HttpRequest, *args: Any) -> JsonResponse:
    """``POST /auth/token/cli``: the same, for ``airflowctl auth login`` (shorter-lived)."""
    return _login(request, ttl_seconds=CLI_TTL_SECONDS)
