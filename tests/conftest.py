"""Shared fixtures. Tests marked ``postgres`` are skipped unless DATABASE_URL is PostgreSQL,
tests marked ``sqlite`` run on SQLite only (slow tests whose subject is above the database —
Airflow's parser, a browser, a fresh checkout with a database of its own — run once, in the
SQLite lane, which has none of the PostgreSQL-only tests); tests that start real processes are
marked ``slow``, and the others may not start any (tests/lanes.py: ``make test-fast`` is every
test not marked ``slow``)."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from django.db import connection

from tests.lanes import Lanes


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(Lanes(), "lanes")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if connection.vendor == "postgresql":
        marker = "sqlite"
        skip = pytest.mark.skip(reason="runs in the SQLite lane (its subject is not the database)")
    else:
        marker = "postgres"
        skip = pytest.mark.skip(reason="needs PostgreSQL (set DATABASE_URL=postgres://...)")
    for item in items:
        if marker in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def server(transactional_db, tmp_path):
    """A live gunicorn process serving the app against the (committed) test database."""
    from tests.live_server import serve

    yield from serve(tmp_path)


@pytest.fixture(scope="module")
def module_server(django_db_setup, tmp_path_factory):
    from tests.live_server import serve

    yield from serve(tmp_path_factory.mktemp("server"))


@pytest.fixture
def shared_server(module_server, transactional_db):
    """``server``, but one process for all the tests of a module that use it: for tests that
    ask nothing of the server but to serve the committed rows (no environment of their own,
    nothing it would keep from one test to the next). Each test's rows are still committed,
    and emptied after it (``transactional_db``)."""
    return module_server


@pytest.fixture
def await_lock_wait() -> Callable[..., int]:
    """PostgreSQL: wait until a connection to the test database is blocked on a lock.

    ``await_lock_wait(query_like="INSERT INTO %")`` polls ``pg_stat_activity`` for up to
    ``timeout`` seconds and returns how many statements matching ``query_like`` wait on a lock
    (0 if none did): proof that a thread is blocked, not merely slow to get there.
    """

    def wait(*, query_like: str = "%", timeout: float = 10.0) -> int:
        deadline = time.monotonic() + timeout
        while True:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                    " AND wait_event_type = 'Lock' AND query LIKE %s",
                    [query_like],
                )
                waiting = cursor.fetchone()[0]
            if waiting or time.monotonic() >= deadline:
                return waiting
            time.sleep(0.05)

    return wait
