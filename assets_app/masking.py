"""Airflow's masking of sensitive values (``airflow._shared.secrets_masker``): a value is
hidden when the name it is stored under (a variable's key, a key of a connection's extra)
contains one of :data:`SENSITIVE_FIELDS`, compared lower-case with non-word runs as ``_``.

Pure functions, no database: the operator API and the admin mask with them, and
:func:`redacted_merge` puts stored values back where an edited copy still holds ``***``.
"""

from __future__ import annotations

import re
from typing import Any

REPLACEMENT = "***"

#: Airflow 3.3's ``DEFAULT_SENSITIVE_FIELDS``.
SENSITIVE_FIELDS = frozenset(
    {
        "access_key",
        "access_token",
        "api_key",
        "apikey",
        "auth_header",
        "authorization",
        "bearer",
        "connection_string",
        "dsn",
        "passphrase",
        "passwd",
        "password",
        "private_key",
        "proxy",
        "proxy_password",
        "proxies",
        "secret",
        "service_account",
        "service_key",
        "token",
        "keyfile_dict",
        "webhook_url",
    }
)

_NON_WORD = re.compile(r"\W+")


def is_sensitive(name: object) -> bool:
    """Whether a value stored under ``name`` is hidden (Airflow's ``should_hide_value_for_key``)."""
    if not isinstance(name, str):
        return False
    normalized = _NON_WORD.sub("_", name.strip().lower())
    return any(field in normalized for field in SENSITIVE_FIELDS)


def redact(value: Any, name: str | None = None) -> Any:
    """``value`` with every value under a sensitive name replaced by ``***`` (the whole value
    when ``name`` itself is sensitive), walking dicts and lists."""
    if name is not None and is_sensitive(name):
        return REPLACEMENT
    if isinstance(value, dict):
        return {key: redact(item, key) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [redact(item) for item in value]
    return value


def redacted_merge(new: Any, old: Any, name: str | None = None) -> Any:
    """``new`` with each ``***`` left at a sensitive place replaced by ``old``'s value there
    (Airflow's ``merge``): a client that edits a masked extra keeps the hidden values."""
    if name is not None and is_sensitive(name) and new == REPLACEMENT:
        return old
    if isinstance(new, dict) and isinstance(old, dict):
        return {key: redacted_merge(item, old.get(key), key) for key, item in new.items()}
    return new
