"""What the management commands share: their asset and integer options, how a domain error
ends one, and their progress bar."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO, cast

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

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


@contextmanager
def progress_bar(
    command: BaseCommand, *, total: int | None, desc: str, unit: str = "it"
) -> Iterator[tqdm[Any] | None]:
    """A tqdm bar on the command's stderr when that is a terminal, else ``None`` (scripts and
    pipes see no bar, and stdout — the command's results — never carries one).

    While the bar shows, log lines (the root logger's console handlers, stderr) are printed
    above it through ``tqdm.write``, never into it; the bar is closed on the way out, error
    or not.
    """
    stream = cast(TextIO, command.stderr._out)  # the real stream under Django's wrapper
    if not (hasattr(stream, "isatty") and stream.isatty()):
        yield None
        return
    with (
        logging_redirect_tqdm(),
        tqdm(total=total, desc=desc, unit=unit, file=stream, dynamic_ncols=True) as bar,
    ):
        yield bar
