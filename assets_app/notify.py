"""Wake on commit: PostgreSQL ``NOTIFY`` / ``LISTEN`` between producers, schedulers, workers.

Four channels:

* :data:`QUEUE_CHANNEL`: a transaction that queued consumer DAGs (registration, a manual
  event) notifies it; the schedulers listen, so a pass starts as soon as the queue rows
  commit instead of at the next interval.
* :data:`RUNS_CHANNEL`: a scheduler transaction that created runs (``scheduled`` task
  instances) notifies it; workers listen.
* :data:`CALLBACKS_CHANNEL`: a run's end that asked for a DAG-level callback notifies it;
  DAG processors listen, and run it at once instead of at their next pass.
* :data:`TRIGGERS_CHANNEL`: a task instance that deferred notifies it; triggerers listen and
  claim its trigger at once (docs/triggerer.md).

A notification sent inside a transaction is delivered when it commits, and not at all if it
rolls back, so a listener woken up sees the committed rows. Notifications are only a hint:
one can be lost (a listener reconnecting, a server restart), so every listener keeps its
polling interval as the fallback, and a lost notification costs at most one interval, never
any work. On other databases (SQLite) there is nothing to send, and :class:`Listener` only
sleeps.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import psycopg
from django.db import connection

logger = logging.getLogger(__name__)

QUEUE_CHANNEL = "asset_dag_run_queue"
RUNS_CHANNEL = "task_instance_scheduled"
#: a run's end asked for a DAG-level callback (``services.runs.callbacks``); DAG processors listen
CALLBACKS_CHANNEL = "dag_callback_requested"
#: a task instance deferred (a new ``trigger`` row); triggerers listen and claim it at once
TRIGGERS_CHANNEL = "trigger_created"


def notify(channel: str) -> None:
    """``NOTIFY channel`` in the current transaction (sent at commit); nothing on SQLite."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, '')", [channel])


def notify_sql(channel: str) -> str:
    """A ``pg_notify`` call on ``channel`` to put in a PostgreSQL statement's select list, so
    a statement that queues or creates work notifies without a statement of its own."""
    return f"pg_notify('{_checked(channel)}', '')"


class Listener:
    """``LISTEN`` on channels over a connection of its own (PostgreSQL), with a fallback.

    :meth:`wait` returns ``True`` as soon as a notification arrives (and swallows the ones
    already pending: one wake-up per burst), ``False`` when ``timeout`` passed without one.
    A broken connection is dropped and opened again on the next wait; ``wait`` then returns
    ``True`` at once, since notifications sent meanwhile were lost. On SQLite (or when
    listening fails) it only sleeps and returns ``False``: callers poll at their interval.
    """

    def __init__(self, *channels: str, reconnect_delay: float = 1.0) -> None:
        self.channels = tuple(_checked(channel) for channel in channels)
        self.reconnect_delay = reconnect_delay
        self._connection: psycopg.Connection[Any] | None = None
        self._retry_at = 0.0
        self.enabled = connection.vendor == "postgresql"

    def wait(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds for a notification; see the class docstring."""
        if not self.enabled:
            time.sleep(max(timeout, 0.0))
            return False
        if self._connection is None:
            if time.monotonic() < self._retry_at or not self.listen():
                time.sleep(max(timeout, 0.0))
                return False
            return True  # (re)connected: what was sent while not listening is lost
        try:
            woken = any(True for _ in self._connection.notifies(timeout=timeout, stop_after=1))
            if woken:  # the rest of the burst: one pass handles them all
                for _ in self._connection.notifies(timeout=0.0):
                    pass
            return woken
        except psycopg.Error as exc:
            logger.warning("listening on %s failed (%s); reconnecting", self.channels, exc)
            self.close()
            self._retry_at = time.monotonic() + self.reconnect_delay
            time.sleep(max(min(timeout, self.reconnect_delay), 0.0))
            return False

    def close(self) -> None:
        if self._connection is not None:
            try:
                self._connection.close()
            finally:
                self._connection = None

    def backend_pid(self) -> int | None:
        """The listening connection's server process id (None when not connected)."""
        return None if self._connection is None else self._connection.info.backend_pid

    def listen(self) -> bool:
        """Connect and ``LISTEN`` now (else the first :meth:`wait` does); ``True`` if done."""
        if not self.enabled:
            return False
        if self._connection is not None:
            return True
        params = {
            key: value
            for key, value in connection.get_connection_params().items()
            if key not in ("cursor_factory", "context", "prepare_threshold")
        }
        try:
            conn = psycopg.connect(**params, autocommit=True)
            for channel in self.channels:
                conn.execute(f"LISTEN {channel}")
        except psycopg.Error as exc:
            logger.warning("cannot listen on %s (%s); polling", self.channels, exc)
            self._retry_at = time.monotonic() + self.reconnect_delay
            return False
        self._connection = conn
        return True

    def __enter__(self) -> Listener:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _checked(channel: str) -> str:
    if not channel.replace("_", "").isalnum() or not channel.isascii():
        raise ValueError(f"channel names are letters, digits and underscores: {channel!r}")
    return channel
