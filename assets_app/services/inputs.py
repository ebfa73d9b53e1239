"""What services share for their input: the checks of a text field, and the marker of a field
an update leaves alone."""

from __future__ import annotations

import enum

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
