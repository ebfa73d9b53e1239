"""The registration's SQL dialect layer: names and types from the models; others refused."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.db import connection

from assets_app.checks import database_vendor_check
from assets_app.models import AssetEvent
from assets_app.services.sql import Dialect, UnsupportedDatabaseError, columns, table


def test_column_lists_and_tables_come_from_the_models():
    assert table(AssetEvent) == "asset_event"
    assert columns(AssetEvent, "asset", "extra", "timestamp") == ", ".join(
        connection.ops.quote_name(name) for name in ("asset_id", "extra", "timestamp")
    )


@pytest.mark.postgres
def test_postgresql_row_sets_are_typed_like_the_columns():
    rows = Dialect(vendor="postgresql").rows(AssetEvent, ["asset", "extra"], n="integer")
    assert rows == (
        'jsonb_to_recordset(%s::jsonb) AS r("asset_id" bigint, "extra" jsonb, "n" integer)'
    )


def test_sqlite_row_sets_pick_each_member():
    rows = Dialect(vendor="sqlite").rows(AssetEvent, ["asset"], n="integer")
    assert rows == (
        "(SELECT json_extract(value, '$.asset_id') AS \"asset_id\", "
        "json_extract(value, '$.n') AS \"n\" FROM json_each(%s)) AS r"
    )


def test_another_database_is_refused_with_a_clear_error(monkeypatch):
    monkeypatch.setattr(connection, "vendor", "mysql")

    with pytest.raises(
        UnsupportedDatabaseError, match="supports PostgreSQL and SQLite, not 'mysql'"
    ):
        Dialect.current()
    (error,) = database_vendor_check()
    assert error.id == "assets_app.E001"
    assert "DATABASE_URL" in error.msg
    with pytest.raises(SystemCheckError, match=r"assets_app\.E001"):
        call_command("check")


def test_the_supported_databases_pass_the_check():
    assert database_vendor_check() == []
