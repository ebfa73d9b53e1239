"""System checks: refuse a database the registry's SQL is not written for, and a
``FERNET_KEY`` that cannot encrypt."""

from __future__ import annotations

from typing import Any

from django.core import checks
from django.core.checks import CheckMessage, Error, register
from django.db import connections

from assets_app import crypto
from assets_app.services.sql import SUPPORTED_VENDORS, unsupported_database_message


@register()
def database_vendor_check(*args: Any, **kwargs: Any) -> list[CheckMessage]:
    """Runs with every command that checks (``runserver``, ``migrate``, ``check``); reading
    the vendor opens no connection."""
    return [
        Error(unsupported_database_message(connection.vendor), id="assets_app.E001")
        for connection in connections.all()
        if connection.vendor not in SUPPORTED_VENDORS
    ]


@register()
def fernet_key_check(*args: Any, **kwargs: Any) -> list[CheckMessage]:
    """A ``FERNET_KEY`` entry that is not a Fernet key stops every command (E010); no key at
    all in production is a warning (W010): secrets are then refused, never stored plain."""
    keys = crypto.configured_keys()
    messages: list[CheckMessage] = [
        Error(problem, id="assets_app.E010") for problem in crypto.key_problems(keys)
    ]
    if not crypto.is_configured():
        messages.append(
            checks.Warning(
                "FERNET_KEY is not set: connection passwords, extras and variable values "
                "cannot be stored (they are never stored in plain text)",
                hint="Set FERNET_KEY to the output of `python -c 'from cryptography.fernet "
                "import Fernet; print(Fernet.generate_key().decode())'`",
                id="assets_app.W010",
            )
        )
    return messages
