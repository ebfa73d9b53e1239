"""The rules every request parameter of the operator API follows, each in one place.

- **Text**: no parameter, path segment or cursor value may hold U+0000, which no database
  column stores (PostgreSQL refuses it with an error, SQLite would only never match it).
  :func:`refuse_nul` checks every query parameter (400 naming it) and every path parameter
  (404: no object has such an id) before a view runs; the cursor's decoded key is checked with
  :func:`has_nul` (400 naming ``cursor``).
- **Datetimes** (``after``, ``before``, a cursor's timestamp): ISO 8601, read by
  :func:`parse_datetime_parameter`; one without an offset is in ``TIME_ZONE``; one whose UTC
  time falls outside years 1 to 9999 (``9999-12-31T23:59:59-05:00``) is refused, as no
  database stores it; any offset Python reads (up to ±23:59) is accepted and the time used in
  UTC.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from django.utils import timezone
from django.utils.dateparse import parse_datetime
from rest_framework import exceptions
from rest_framework.request import Request

NUL = "\x00"
NUL_PARAMETER_MESSAGE = "Must not contain NUL characters (\\u0000)."
INVALID_DATETIME = "Enter a valid date/time."
NAIVE_DATETIME = "Enter a date/time with a UTC offset."
DATETIME_OUT_OF_RANGE = (
    "Out of range: the time must fall within years 1 to 9999 in UTC (got {value!r})."
)


def has_nul(value: object) -> bool:
    return isinstance(value, str) and NUL in value


def refuse_nul(request: Request, path_parameters: Mapping[str, Any]) -> None:
    """400 naming each query parameter whose name or a value holds U+0000; else 404 if a path
    parameter holds it."""
    errors = {
        name: [NUL_PARAMETER_MESSAGE]
        for name, values in request.query_params.lists()
        if has_nul(name) or any(has_nul(value) for value in values)
    }
    if errors:
        raise exceptions.ValidationError(errors)
    if any(has_nul(value) for value in path_parameters.values()):
        raise exceptions.NotFound()


class DatetimeParameterError(ValueError):
    """Why a datetime parameter was refused: its message is the one to show."""


def parse_datetime_parameter(raw: str, *, require_offset: bool = False) -> datetime:
    """An aware datetime from ISO 8601 text, within years 1 to 9999 in UTC; one without an
    offset is in ``TIME_ZONE``, or refused with ``require_offset``.

    Raises :class:`DatetimeParameterError` with :data:`INVALID_DATETIME`,
    :data:`NAIVE_DATETIME` or :data:`DATETIME_OUT_OF_RANGE`.
    """
    try:
        parsed = parse_datetime(raw.strip())
    except ValueError:  # well-formed but impossible: 2026-02-30, an offset of 25 hours
        parsed = None
    if parsed is None:
        raise DatetimeParameterError(INVALID_DATETIME)
    try:
        if timezone.is_naive(parsed):
            if require_offset:
                raise DatetimeParameterError(NAIVE_DATETIME)
            parsed = timezone.make_aware(parsed)
        # in UTC, as every database keeps it: a time beyond year 9999 there overflows, and
        # PostgreSQL refuses offsets beyond ±15:59 that Python reads (``+20:00``)
        return parsed.astimezone(UTC)
    except OverflowError:
        raise DatetimeParameterError(DATETIME_OUT_OF_RANGE.format(value=raw)) from None
