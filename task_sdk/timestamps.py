"""Timestamps as the execution API's clients send them (no ``httpx`` here: the task process
imports this, and a fresh interpreter should not pay for an HTTP stack it does not use)."""

from __future__ import annotations

from datetime import UTC, datetime


def isoformat(when: datetime) -> str:
    """UTC timestamp as the Airflow client sends it: ``2026-11-30T04:50:58.075255Z``."""
    if when.tzinfo is None:
        raise ValueError("timestamps must be timezone-aware")
    return when.astimezone(UTC).isoformat().replace("+00:00", "Z")


def now() -> datetime:
    return datetime.now(tz=UTC)
