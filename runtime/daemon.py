"""The loop of every long-running process — ``manage.py scheduler``, ``dag_processor`` and
``worker`` (and a triggerer next) — written once: :class:`Daemon`.

A daemon runs passes until it is stopped or has nothing more to do. Each command supplies its
pass and its options; the loop owns the rest:

- **stop signals**: each of ``stop_signals`` (SIGTERM; the worker's SIGINT too) is a stop
  request, honoured after the current pass (:meth:`Daemon.request_stop`, which only sets a
  counter, so it is safe in a signal handler; the worker reads a second request as "no grace
  period"). SIGINT, when not among them, stays Python's ``KeyboardInterrupt``: Ctrl-C ends the
  pass at once (its transaction rolls back);
- **the connection**: refreshed before each pass, as between requests (a broken or too old
  one is dropped), dropped after a pass that failed with one of ``recoverable`` (reported, the
  next pass tries again) and on the way out;
- **waiting** between passes, up to ``interval`` seconds: woken by a ``NOTIFY`` on
  ``channel`` on PostgreSQL (:class:`assets_app.notify.Listener`, listening before the first
  pass so that no commit after it goes unnoticed; not with ``max_passes=1``, ``--once``),
  polling on SQLite, and at once by a stop request or by the daemon's own ``woken()`` (the
  worker's: a task's process exited);
- **how many passes**: ``max_passes`` (``--once`` is 1, ``--max-passes N``), or until a pass
  returns ``False`` (the worker's ``--max-tasks`` reached).
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from django.db import close_old_connections, connection

from assets_app.notify import Listener

logger = logging.getLogger(__name__)

#: Seconds between checks while waiting (for a notification, a stop request, a child's exit).
WAIT_SLICE = 0.1
#: How often (seconds) a waiting daemon checks whether it was asked to stop, by default.
STOP_CHECK = 0.25

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


def _nothing() -> None:
    """A hook that does nothing."""


def _never() -> bool:
    return False


def _log_error(line: str) -> None:
    logger.error("%s", line)


@dataclass(kw_only=True, eq=False)
class Daemon:
    """Runs ``run_pass`` pass after pass until stopped (see the module docstring).

    ``run_pass`` returns ``False`` when the daemon has nothing more to do. ``started`` is called
    once the stop signals are handled and the listener listens, before the first pass;
    ``finish`` after the last pass (not after a ``KeyboardInterrupt``); ``close`` on the way
    out, error or not, before the connection is dropped. A pass that raises one of
    ``recoverable`` is reported to ``report_error`` as ``"<name> pass failed: <error>"``."""

    name: str
    run_pass: Callable[[], bool]
    interval: float
    max_passes: int | None = None
    channel: str | tuple[str, ...] | None = None
    stop_signals: Collection[signal.Signals] = STOP_SIGNALS
    check_every: float = STOP_CHECK
    recoverable: tuple[type[Exception], ...] = ()
    report_error: Callable[[str], None] = _log_error
    woken: Callable[[], bool] = _never
    started: Callable[[], None] = _nothing
    finish: Callable[[], None] = _nothing
    close: Callable[[], None] = _nothing
    passes: int = field(default=0, init=False)
    stop_requests: int = field(default=0, init=False)

    def request_stop(self) -> None:
        """Stop after the current pass (or wait). Only counts, so it is safe in a signal
        handler."""
        self.stop_requests += 1

    @property
    def stopping(self) -> bool:
        return self.stop_requests > 0

    def run(self) -> int:
        """Run until stopped, ``max_passes`` are done or a pass returns ``False``; the number
        of passes run."""
        channels = (self.channel,) if isinstance(self.channel, str) else self.channel or ()
        listener = Listener(*channels) if channels else None
        with stop_signals(self.request_stop, signals=self.stop_signals):
            try:
                if listener is not None and self.max_passes != 1:
                    listener.listen()  # before the first pass: no commit after it goes unnoticed
                self.started()
                while not self.stopping:
                    more = self._pass()
                    self.passes += 1
                    if not more or self.passes == self.max_passes:
                        break
                    wait_for_work(
                        self.interval,
                        interrupted=self._interrupted,
                        listener=listener,
                        check_every=self.check_every,
                    )
                self.finish()
            except KeyboardInterrupt:
                pass
            finally:
                if listener is not None:
                    listener.close()
                self.close()
                connection_close()
        return self.passes

    def _pass(self) -> bool:
        connection_refresh()
        try:
            return self.run_pass()
        except self.recoverable as exc:
            self.report_error(f"{self.name} pass failed: {exc}")
            connection_close()
            return True

    def _interrupted(self) -> bool:
        return self.stopping or self.woken()
