"""System checks: refuse a database the registry's SQL is not written for."""

from __future__ import annotations

from typing import Any

from django.core.checks import CheckMessage, Error, register
from django.db import connections

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
