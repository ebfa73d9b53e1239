"""JWT tokens that authenticate a task runner for one task instance (docs/api-execution.md, "Auth").

A domain concept: services issue them (``create_task_instance``, the worker), the execution
API checks them.

Claims: ``sub`` (task instance UUID), ``aud``, ``iat``, ``nbf``, ``exp``, ``jti``.
"""

from __future__ import annotations

import functools
import os
import secrets
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jwt
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from assets_app.exceptions import TokenError

ALGORITHM = "HS512"
#: A token with less than this share of its lifetime left is refreshed in the response.
REFRESH_WHEN_REMAINING = 0.2
#: The longest lifetime a token may be issued for: ten years (longer ones overflow dates).
MAX_TTL_SECONDS = 10 * 365 * 24 * 3600


def ttl_problem(ttl_seconds: int) -> str | None:
    """Why a token lifetime cannot be used (``None`` when it can)."""
    if ttl_seconds <= 0:
        return f"must be a positive number of seconds, got {ttl_seconds}"
    if ttl_seconds > MAX_TTL_SECONDS:
        return f"must be at most {MAX_TTL_SECONDS} seconds (ten years), got {ttl_seconds}"
    return None


def settings_check() -> None:
    """Refuse token settings no token could be issued or checked with: raise
    ``ImproperlyConfigured`` naming the setting (at start-up, ``AssetsAppConfig.ready``)."""
    config = _config()
    ttl = config["JWT_TTL_SECONDS"]
    if not isinstance(ttl, int) or (problem := ttl_problem(ttl)) is not None:
        problem = problem if isinstance(ttl, int) else f"must be a whole number, got {ttl!r}"
        raise ImproperlyConfigured(f"JWT_TTL_SECONDS {problem}")
    leeway = config["JWT_LEEWAY_SECONDS"]
    if not isinstance(leeway, int) or not 0 <= leeway < ttl:
        raise ImproperlyConfigured(
            f"JWT_LEEWAY_SECONDS must be 0 or more and less than JWT_TTL_SECONDS ({ttl}), "
            f"got {leeway!r}"
        )


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


def signing_secret() -> str:
    """``EXECUTION_API["JWT_SECRET"]``, else the secret kept in ``DATA_DIR/jwt_secret``,
    generated there the first time a token is signed or checked."""
    configured: str = _config()["JWT_SECRET"]
    return configured or _kept_secret(Path(settings.DATA_DIR) / "jwt_secret")


@functools.cache
def _kept_secret(path: Path) -> str:
    """The secret in ``path``; a new one written there if there is none.

    The file is created with mode 0600 and appears complete or not at all (written aside,
    then hard-linked into place); when two processes race, both use the first one linked.
    """
    try:
        return _read_secret(path)
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    value = secrets.token_urlsafe(48)  # 64 characters
    aside = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    descriptor = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(descriptor, "w") as file:
            file.write(value)
            file.flush()
            os.fsync(file.fileno())
        try:
            os.link(aside, path)
        except FileExistsError:  # another process was first: use its secret
            return _read_secret(path)
    finally:
        os.unlink(aside)
    return value


def _read_secret(path: Path) -> str:
    value = path.read_text().strip()
    if not value:
        raise ImproperlyConfigured(f"{path} is empty: delete it to have a new secret generated")
    return value


def token_issue(*, task_instance_id: str | uuid.UUID, ttl_seconds: int | None = None) -> str:
    """Sign a token for one task instance, valid for ``ttl_seconds`` (default from settings)."""
    config = _config()
    ttl = config["JWT_TTL_SECONDS"] if ttl_seconds is None else ttl_seconds
    if (problem := ttl_problem(ttl)) is not None:
        raise ValueError(f"ttl_seconds {problem}")
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
    return jwt.encode(claims, signing_secret(), algorithm=ALGORITHM)


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
            signing_secret(),
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
