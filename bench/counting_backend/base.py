"""Django's PostgreSQL backend, counting every statement PostgreSQL receives. Bench only.

Counted, on each connection (``DatabaseWrapper.bench_statements``):

* every ``execute`` of a psycopg cursor, and one per parameter set of ``executemany``. The
  cursors come from the connection's ``cursor_factory``, which Django's own cursors use and
  so do the raw cursors of the health check (``SELECT 1`` in ``is_usable``) and of the
  connection set-up (``SET TIME ZONE``, ``SET ROLE``);
* the ``BEGIN`` psycopg sends before the first statement of a transaction (autocommit off and
  no transaction open yet);
* ``COMMIT`` and ``ROLLBACK`` when a transaction is open (psycopg sends nothing otherwise).

Not counted: the ``FETCH``/``CLOSE`` of server-side cursors (``QuerySet.iterator()``), which
psycopg sends without going through ``execute``; the code measured here does not use them.

Also kept per connection: how long each transaction stayed open (first statement to end of
``COMMIT``/``ROLLBACK``), ``bench_transaction_seconds``, which the scheduler benchmark uses to
bound the gap between a row's ``created_at`` and its commit.

Checked against PostgreSQL's own log (``log_statement = all``): ``bench_http.py
--check-statements-log`` counts, for the server's backend pids, the statements PostgreSQL
logged and compares them with the sum of the per-request counts.
"""

from __future__ import annotations

import time
from typing import Any

from django.db.backends.postgresql import base as postgresql
from psycopg.pq import TransactionStatus


class DatabaseWrapper(postgresql.DatabaseWrapper):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.bench_statements = 0
        self.bench_transaction_seconds: list[float] = []
        self._bench_transaction_started: float | None = None

    def _bench_sent(self, connection: Any, statements: int) -> None:
        """Count ``statements`` about to be sent on ``connection``, and psycopg's BEGIN."""
        if not connection.autocommit and connection.info.transaction_status == (
            TransactionStatus.IDLE
        ):
            self.bench_statements += 1
            self._bench_transaction_started = time.perf_counter()
        self.bench_statements += statements

    def _bench_ended(self) -> None:
        if self.connection is None or self.connection.info.transaction_status == (
            TransactionStatus.IDLE
        ):
            return
        self.bench_statements += 1
        if self._bench_transaction_started is not None:
            self.bench_transaction_seconds.append(
                time.perf_counter() - self._bench_transaction_started
            )
            self._bench_transaction_started = None

    def get_connection_params(self) -> dict[str, Any]:
        params = super().get_connection_params()
        params["cursor_factory"] = self._counting(params["cursor_factory"])
        # the server-binding cursor of the hand-written statements (sql.statements_cursor)
        self.binding_cursor_factory = self._counting(postgresql.ServerBindingCursor)
        return params

    def _counting(self, base: type) -> type:
        wrapper = self

        class CountingCursor(base):
            def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
                wrapper._bench_sent(self.connection, 1)
                return super().execute(query, params, **kwargs)

            def executemany(self, query: Any, params_seq: Any, **kwargs: Any) -> Any:
                params_seq = list(params_seq)
                wrapper._bench_sent(self.connection, len(params_seq))
                return super().executemany(query, params_seq, **kwargs)

        return CountingCursor

    def _commit(self) -> Any:
        self._bench_ended()
        return super()._commit()

    def _rollback(self) -> Any:
        self._bench_ended()
        return super()._rollback()
