"""What the management commands share: their asset and integer options, and how a domain
error ends one."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.core.management.base import CommandError, CommandParser

from assets_app.exceptions import AssetsError


def add_asset_arguments(parser: CommandParser) -> None:
    """``--name`` and ``--uri``: an asset by its name, its uri or both."""
    parser.add_argument("--name", help="asset name")
    parser.add_argument("--uri", help="asset uri")


def optional_int_argument(parser: CommandParser, flag: str, *, help: str) -> None:
    """An integer option that is ``None`` when not given (its command checks the range)."""
    parser.add_argument(flag, type=int, default=None, help=help)


@contextmanager
def domain_errors() -> Iterator[None]:
    """A domain error (:class:`~assets_app.exceptions.AssetsError`) raised inside ends the
    command with its message (``CommandError``: exit status 1, nothing else printed)."""
    try:
        yield
    except AssetsError as exc:
        raise CommandError(str(exc)) from exc
