"""Bench-only middleware: the statements each request sent, in response headers.

``X-Bench-Statements``: statements PostgreSQL received on this thread's connection while the
request went through the middleware stack (health check, BEGIN and COMMIT included; counted
by ``bench.counting_backend``). ``X-Bench-Db-Pid``: that connection's PostgreSQL backend
pid, so that a benchmark can read its CPU time or find its lines in PostgreSQL's log.
Outermost in ``bench.settings.MIDDLEWARE``.
"""

from __future__ import annotations

from collections.abc import Callable

from django.db import connection
from django.http import HttpRequest, HttpResponse


class StatementCountMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        before = getattr(connection, "bench_statements", None)
        response = self.get_response(request)
        if before is not None:
            response["X-Bench-Statements"] = str(connection.bench_statements - before)
            if connection.connection is not None:
                response["X-Bench-Db-Pid"] = str(connection.connection.info.backend_pid)
        return response
