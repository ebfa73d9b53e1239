"""What the variable and connection services share: the checks of their text fields, and
the marker of a field an update leaves alone."""

from __future__ import annotations

import enum
import json
from typing import Any

from assets_app.exceptions import InvalidInputError


class Keep(enum.Enum):
    """An update's "leave this field as stored" (``None`` would clear it)."""

    KEEP = "keep"


KEEP = Keep.KEEP


def checked_text(
    value: str | None, *, field: str, max_length: int | None = None, required: bool = False
) -> str | None:
    """``value`` once it can be stored in a text column, else ``InvalidInputError`` naming
    ``field``: no NUL character (PostgreSQL rejects it), at most ``max_length`` characters,
    not empty when ``required``."""
    if value is None:
        if required:
            raise InvalidInputError(f"{field} is required", field=field)
        return None
    if not isinstance(value, str):
        raise InvalidInputError(f"{field} must be a string", field=field)
    if required and not value:
        raise InvalidInputError(f"{field} must not be empty", field=field)
    if "\x00" in value:
        raise InvalidInputError(f"{field} must not contain NUL characters (\\u0000)", field=field)
    if max_length is not None and len(value) > max_length:
        raise InvalidInputError(
            f"{field} must be at most {max_length} characters (got {len(value)})", field=field
        )
    return value


def checked_extra(extra: str | None) -> str | None:
    """A connection's extra: ``None``/empty, or the JSON text of an object (Airflow's
    ``Connection._validate_extra`` refuses anything else)."""
    if extra is None or extra == "":
        return None
    if not isinstance(extra, str):
        raise InvalidInputError("extra must be the JSON text of an object", field="extra")
    try:
        loaded: Any = json.loads(extra)
    except ValueError as exc:
        raise InvalidInputError(
            f"extra must be the JSON text of an object: {exc}", field="extra"
        ) from exc
    if not isinstance(loaded, dict):
        raise InvalidInputError("extra must be a JSON object", field="extra")
    return extra
