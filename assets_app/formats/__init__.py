"""Date and time formats (``settings.FORMAT_MODULE_PATH``): one timestamp format everywhere.

``timestamp_human`` is how a person reads a timestamp: in the admin, in the management
commands' output and in the operator API's human output (``2026-12-01 19:25:28 UTC``); JSON
keeps ISO 8601. ``duration_human`` is how they read a length of time (``1.9 s``,
``2 m 40 s``). Both are importable without the admin.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.utils import dateformat, timezone

#: The one timestamp format (``django.utils.dateformat``), also the admin's ``DATETIME_FORMAT``.
TIMESTAMP_FORMAT = "Y-m-d H:i:s T"

#: What ``timestamp_human`` and ``duration_human`` return for no value.
NONE = "-"


def timestamp_human(value: datetime | None) -> str:
    """``2026-12-01 19:25:28 UTC``: seconds and the time zone (``settings.TIME_ZONE``), so that
    events seconds apart read differently, whatever the active language. A naive datetime is
    taken as UTC."""
    if value is None:
        return NONE
    if timezone.is_naive(value):
        value = value.replace(tzinfo=UTC)
    return dateformat.format(timezone.localtime(value), TIMESTAMP_FORMAT)


def duration_human(value: timedelta | float | None) -> str:
    """A duration as a person says it: ``0.4 s``, ``1.9 s``, ``42 s``, ``2 m 40 s``,
    ``3 h 05 m``, ``2 d 4 h``. ``value`` is a ``timedelta`` or seconds; a negative one (clock
    skew) reads ``0 s``."""
    if value is None:
        return NONE
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    seconds = max(seconds, 0.0)
    if seconds < 10:
        tenths = round(seconds, 1)
        return f"{tenths:g} s" if tenths < 10 else "10 s"
    whole = round(seconds)
    days, rest = divmod(whole, 86_400)
    hours, rest = divmod(rest, 3_600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {minutes:02d} m"
    if minutes:
        return f"{minutes} m {secs} s"
    return f"{secs} s"
