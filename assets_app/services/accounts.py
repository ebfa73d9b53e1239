"""The operator's admin login (``ensure_admin``, used by ``make run``)."""

from __future__ import annotations

import logging
import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction

logger = logging.getLogger(__name__)


@transaction.atomic
def admin_user_ensure(*, username: str) -> str:
    """Create the superuser ``username`` if missing, give it a fresh random password and
    return that password (the account is also made active, staff and superuser)."""
    if not username or len(username) > 150:
        raise ValueError("username must be 1-150 characters")
    user_model = get_user_model()
    lookup: dict[str, Any] = {user_model.USERNAME_FIELD: username}
    user, created = user_model.objects.get_or_create(**lookup)
    password = secrets.token_urlsafe(12)
    user.set_password(password)
    user.is_active = user.is_staff = user.is_superuser = True
    user.save()
    logger.info("admin user %s %s", username, "created" if created else "password reset")
    return password
