"""What the long-running processes (``manage.py scheduler``, ``manage.py worker``) share:
stop signals, a fresh database connection between rounds, and waiting for work — woken by a
``NOTIFY`` on PostgreSQL (:class:`assets_app.notify.Listener`), polling on SQLite."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from django.db import close_old_connections, connection

from assets_app.notify import Listener

#: Seconds between checks while waiting (for a notification, a stop request, a child's exit).
WAIT_SLICE = 0.1

STOP_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGINT)


@contextmanager
def stop_signals(
    on_stop: Callable[[], None], signals: Collection[signal.Signals] = STOP_SIGNALS
) -> Iterator[None]:
    """Call ``on_stop()`` on each of ``signals`` while inside, then restore the previous
    handlers. ``on_stop`` runs in a signal handler: it should only set flags. Off the main
    thread (where handlers cannot be set, e.g. a test calling a command in a thread) it does
    nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        on_stop()

    previous: dict[signal.Signals, Any] = {sig: signal.signal(sig, handler) for sig in signals}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def connection_refresh() -> None:
    """Between rounds, as between requests: drop a broken or too old connection. Not inside a
    transaction (e.g. a test's), whose connection must stay."""
    if not connection.in_atomic_block:
        close_old_connections()


def connection_close() -> None:
    """Drop the connection (after a database error, or on the way out); not inside a
    transaction."""
    if not connection.in_atomic_block:
        connection.close()


def wait_for_work(
    timeout: float,
    *,
    interrupted: Callable[[], bool],
    listener: Listener | None = None,
    check_every: float = WAIT_SLICE,
) -> None:
    """Wait up to ``timeout`` seconds for work.

    Returns early when ``interrupted()`` (checked every ``check_every`` seconds: a stop was
    requested, a child exited) or, with an enabled ``listener`` (PostgreSQL), as soon as one
    of its channels is notified. Without one (SQLite) it only sleeps: the timeout is the poll.
    """
    deadline = time.monotonic() + timeout
    listening = listener is not None and listener.enabled
    while not interrupted():
        left = deadline - time.monotonic()
        if left <= 0:
            return
        if not listening:
            time.sleep(min(check_every, left))
        elif listener is not None and listener.wait(min(check_every, left)):
            return
