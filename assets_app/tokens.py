"""JWT tokens that authenticate a task runner for one task instance (SPEC §3).

A domain concept: services issue them (``create_task_instance``, the worker), the execution
API checks them.

Claims: ``sub`` (task instance UUID), ``aud``, ``iat``, ``nbf``, ``exp``, ``jti``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import jwt
from django.conf import settings

from assets_app.exceptions import TokenError

ALGORITHM = "HS512"
#: A token with less than this share of its lifetime left is refreshed in the response.
REFRESH_WHEN_REMAINING = 0.2


@dataclass(frozen=True)
class TokenClaims:
    subject: str
    issued_at: datetime
    expires_at: datetime

    @property
    def lifetime(self) -> timedelta:
        return self.expires_at - self.issued_at

    def needs_refresh(self, *, now: datetime | None = None) -> bool:
        now = now or datetime.now(tz=UTC)
        remaining = (self.expires_at - now).total_seconds()
        return remaining < REFRESH_WHEN_REMAINING * self.lifetime.total_seconds()


def _config() -> dict[str, Any]:
    return settings.EXECUTION_API


def token_issue(*, task_instance_id: str | uuid.UUID, ttl_seconds: int | None = None) -> str:
    """Sign a token for one task instance, valid for ``ttl_seconds`` (default from settings)."""
    config = _config()
    ttl = config["JWT_TTL_SECONDS"] if ttl_seconds is None else ttl_seconds
    if ttl <= 0:
        raise ValueError("ttl_seconds must be positive")
    now = datetime.now(tz=UTC)
    claims: dict[str, Any] = {
        "sub": str(task_instance_id),
        "aud": config["JWT_AUDIENCE"],
        "iat": int(now.timestamp()),
        "nbf": int(now.timestamp()),
        "exp": int((now + timedelta(seconds=ttl)).timestamp()),
        "jti": uuid.uuid4().hex,
    }
    if config.get("JWT_ISSUER"):
        claims["iss"] = config["JWT_ISSUER"]
    return jwt.encode(claims, config["JWT_SECRET"], algorithm=ALGORITHM)


def token_decode(token: str) -> TokenClaims:
    """Verify signature, audience and time claims; raise ``TokenError`` with the reason."""
    config = _config()
    options: jwt.types.Options = {"require": ["sub", "aud", "exp", "iat"]}
    kwargs: dict[str, Any] = {}
    if config.get("JWT_ISSUER"):
        kwargs["issuer"] = config["JWT_ISSUER"]
    try:
        claims = jwt.decode(
            token,
            config["JWT_SECRET"],
            algorithms=[ALGORITHM],
            audience=config["JWT_AUDIENCE"],
            leeway=config["JWT_LEEWAY_SECONDS"],
            options=options,
            **kwargs,
        )
    except jwt.ExpiredSignatureError as exc:
        raise TokenError("token has expired") from exc
    except jwt.InvalidAudienceError as exc:
        raise TokenError("token is for another audience") from exc
    except jwt.ImmatureSignatureError as exc:
        raise TokenError("token is not valid yet") from exc
    except jwt.PyJWTError as exc:
        raise TokenError(f"invalid token: {exc}") from exc
    return TokenClaims(
        subject=str(claims["sub"]),
        issued_at=datetime.fromtimestamp(claims["iat"], tz=UTC),
        expires_at=datetime.fromtimestamp(claims["exp"], tz=UTC),
    )
