"""Command-line options the management commands share."""

from __future__ import annotations

from django.core.management.base import CommandParser


def optional_int_argument(parser: CommandParser, flag: str, *, help: str) -> None:
    """An integer option that is ``None`` when not given (its command checks the range)."""
    parser.add_argument(flag, type=int, default=None, help=help)
