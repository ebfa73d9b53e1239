"""Accounts: the operator's admin login (``ensure_admin``, used by ``make run``) and the
throttling of failed logins (``LOGIN_THROTTLE``)."""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from assets_app.models import LoginFailures
from assets_app.models.accounts import LOGIN_KEY_LENGTH

logger = logging.getLogger(__name__)


@transaction.atomic
def admin_user_ensure(*, username: str, reset_password: bool = False) -> str | None:
    """Make sure the superuser ``username`` exists, active, staff and superuser. A new user
    (or ``reset_password``) gets a fresh random password, which is returned; an existing
    user keeps the one it has (a changed password survives ``make run``): ``None``."""
    if not username or len(username) > 150:
        raise ValueError("username must be 1-150 characters")
    user_model = get_user_model()
    lookup: dict[str, Any] = {user_model.USERNAME_FIELD: username}
    user, created = user_model.objects.get_or_create(**lookup)
    password = None
    if created or reset_password or not user.has_usable_password():
        password = secrets.token_urlsafe(12)
        user.set_password(password)
    user.is_active = user.is_staff = user.is_superuser = True
    user.save()
    logger.info(
        "admin user %s %s",
        username,
        "created" if created else "password reset" if password else "kept",
    )
    return password


# --- login throttling ------------------------------------------------------------------------


@dataclass(frozen=True)
class LoginKeys:
    """The two counts one login attempt touches: this user from this address, and this
    address for any user."""

    user: str
    address: str

    @classmethod
    def of(cls, *, username: str, address: str) -> LoginKeys:
        address = address[:45] or "unknown"
        return cls(
            user=f"user:{address} {username}"[:LOGIN_KEY_LENGTH], address=f"address:{address}"
        )


def _throttle() -> dict[str, Any]:
    return settings.LOGIN_THROTTLE


def login_wait(keys: LoginKeys, *, now: datetime | None = None) -> float:
    """Seconds to wait before this login may check a password (0: at once). 1 query."""
    now = now or timezone.now()
    locked_until = (
        LoginFailures.objects.filter(key__in=(keys.user, keys.address), locked_until__gt=now)
        .order_by("-locked_until")
        .values_list("locked_until", flat=True)
        .first()
    )
    return 0.0 if locked_until is None else (locked_until - now).total_seconds()


def _delay(failures: int, limit: int) -> float | None:
    """Airflow has none; ours: none below ``limit`` failures, then ``BASE_SECONDS`` doubled
    per further failure, at most ``MAX_SECONDS``."""
    if failures < limit:
        return None
    config = _throttle()
    doublings = min(failures - limit, 32)  # 2**32 s is past any MAX_SECONDS
    return float(min(config["BASE_SECONDS"] * 2**doublings, config["MAX_SECONDS"]))


@transaction.atomic
def login_failed(keys: LoginKeys, *, now: datetime | None = None) -> float:
    """Count a failed login for both keys (a count older than ``MAX_SECONDS`` starts again)
    and lock them per :func:`_delay`; returns the longer lock, in seconds (0: none). Safe
    under concurrency: each row is locked while it is counted."""
    now = now or timezone.now()
    config = _throttle()
    lapsed = now - timedelta(seconds=config["MAX_SECONDS"])
    longest = 0.0
    for key, limit in (
        (keys.user, config["USER_FAILURES"]),
        (keys.address, config["ADDRESS_FAILURES"]),
    ):
        LoginFailures.objects.get_or_create(key=key, defaults={"last_failure_at": now})
        row = LoginFailures.objects.select_for_update().get(key=key)
        failures = 1 if row.last_failure_at < lapsed and row.failures else row.failures + 1
        delay = _delay(failures, limit)
        row.failures = failures
        row.last_failure_at = now
        row.locked_until = None if delay is None else now + timedelta(seconds=delay)
        row.save(update_fields=["failures", "last_failure_at", "locked_until"])
        longest = max(longest, delay or 0.0)
    return longest


def login_succeeded(keys: LoginKeys) -> None:
    """A right password: this user's count from this address starts again (the address's
    count for any user does not: one good account must not reset a guesser's count)."""
    LoginFailures.objects.filter(key=keys.user).delete()
