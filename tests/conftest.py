"""Shared fixtures. Tests marked ``postgres`` are skipped unless DATABASE_URL is PostgreSQL."""

from __future__ import annotations

import pytest
from django.db import connection


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if connection.vendor == "postgresql":
        return
    skip = pytest.mark.skip(reason="needs PostgreSQL (set DATABASE_URL=postgres://...)")
    for item in items:
        if "postgres" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def server(transactional_db, tmp_path):
    """A live gunicorn process serving the app against the (committed) test database."""
    from tests.live_server import serve

    yield from serve(tmp_path)
