"""The registration's SQL dialect layer: names and types from the models; others refused."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.db import DEFAULT_DB_ALIAS, connection, connections

from assets_app.checks import database_vendor_check
from assets_app.models import AssetEvent, Dag
from assets_app.services.sql import (
    Dialect,
    Statement,
    UnsupportedDatabaseError,
    column_values,
    columns,
    json_text,
    model_from_row,
    statements_cursor,
    table,
)
from tests.factories import AssetEventFactory, DagFactory


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


class _Recorder:
    def __init__(self) -> None:
        self.sent: list[tuple[str, list]] = []

    def execute(self, text: str, params) -> None:
        self.sent.append((text, list(params)))


@pytest.mark.parametrize("vendor", ["postgresql", "sqlite"])
def test_independent_writes_are_one_statement_on_postgresql_only(vendor):
    first = Statement("INSERT INTO a (x)\n  SELECT %s", [1])
    last = Statement("WITH r AS (SELECT %s AS y) INSERT INTO b (y) SELECT y FROM r", [2])
    cursor = _Recorder()

    Dialect(vendor=vendor).execute_all(cursor, [None, first, None, last])

    if vendor == "postgresql":  # the last one's own CTEs join the list, params in text order
        assert cursor.sent == [
            (
                "WITH s0 AS (INSERT INTO a (x) SELECT %s), r AS (SELECT %s AS y) "
                "INSERT INTO b (y) SELECT y FROM r",
                [1, 2],
            )
        ]
    else:
        assert cursor.sent == [
            ("INSERT INTO a (x) SELECT %s", [1]),
            ("WITH r AS (SELECT %s AS y) INSERT INTO b (y) SELECT y FROM r", [2]),
        ]


def test_nothing_to_run_sends_nothing():
    cursor = _Recorder()
    Dialect(vendor="postgresql").execute_all(cursor, [None, None])
    assert cursor.sent == []


@pytest.mark.django_db
def test_seconds_between_is_exact_to_the_microsecond():
    sql = Dialect.current()
    later, earlier = "2026-11-30 04:50:58.540508", "2026-11-30 04:50:46.040507"
    cast = "CAST(%s AS timestamp)" if sql.postgresql else "%s"
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {sql.seconds_between(cast, cast)}", [later, earlier])
        [seconds] = cursor.fetchone()
    assert float(seconds) == 12.500001


@pytest.mark.postgres
@pytest.mark.django_db
def test_postgresql_prepares_a_hand_written_statement_after_the_threshold_and_counts_it(
    django_assert_num_queries,
):
    connection.ensure_connection()
    threshold = connection.connection.prepare_threshold
    assert threshold == 5  # the settings' default (DATABASE_PREPARE_THRESHOLD)
    statement = "SELECT count(*) + %s FROM asset_event WHERE asset_id = %s /* prepared? */"

    def prepared() -> list[str]:
        with connection.cursor() as cursor:
            cursor.execute("SELECT statement FROM pg_prepared_statements")
            return [row[0] for row in cursor.fetchall() if "prepared?" in row[0]]

    with django_assert_num_queries(threshold + 1):  # prepared or not, each one is counted
        for n in range(threshold + 1):
            with statements_cursor() as cursor:
                Dialect.current().execute(cursor, statement, [n, -1])
                assert cursor.fetchone() == (n,)
    assert prepared() == [
        "SELECT count(*) + $1 FROM asset_event WHERE asset_id = $2 /* prepared? */"
    ]

    with connection.cursor() as cursor:  # the ORM's (client-side binding): never prepared
        for _ in range(threshold + 1):
            cursor.execute(
                "SELECT count(*) FROM asset_event WHERE asset_id = %s /* prepared? */", [-2]
            )
    assert len(prepared()) == 1


@pytest.mark.django_db
def test_the_statements_cursor_runs_statements_on_both_databases():
    with statements_cursor() as cursor:
        Dialect.current().execute(cursor, "SELECT %s + %s", [2, 3])
        assert cursor.fetchone() == (5,)


@pytest.mark.postgres
@pytest.mark.django_db
def test_the_statements_cursor_checks_a_persistent_connections_health_first(monkeypatch):
    # as connection.cursor() does (CONN_HEALTH_CHECKS): a connection broken since its last
    # request (the database restarted) is replaced before the statement, not used
    db = connections[DEFAULT_DB_ALIAS]
    db.ensure_connection()
    checked: list[bool] = []
    monkeypatch.setattr(db, "health_check_enabled", True)
    monkeypatch.setattr(db, "health_check_done", False)
    monkeypatch.setattr(db, "is_usable", lambda: checked.append(True) or True)
    with statements_cursor() as cursor:
        Dialect.current().execute(cursor, "SELECT %s", [1])
        assert cursor.fetchone() == (1,)
    assert checked == [True]


@pytest.mark.django_db
def test_values_read_by_hand_are_converted_as_the_orm_reads_them():
    # SQLite returns a datetime column as text: the backend's converter, not the field's, turns
    # it into an aware datetime (the scheduler reads a queue row's created_at so)
    event = AssetEventFactory(extra={"k": [1, 2]})
    with connection.cursor() as cursor:
        cursor.execute('SELECT "timestamp", extra FROM asset_event WHERE id = %s', [event.pk])
        row = cursor.fetchone()
    read = model_from_row(AssetEvent, ("timestamp", "extra"), row)
    stored = AssetEvent.objects.get(pk=event.pk)
    assert (
        (read.timestamp, read.extra)
        == (stored.timestamp, stored.extra)
        == (
            event.timestamp,
            {"k": [1, 2]},
        )
    )


@pytest.mark.django_db
def test_values_of_one_column_are_converted_as_the_orm_reads_them():
    first, second = AssetEventFactory(), AssetEventFactory()
    with connection.cursor() as cursor:
        cursor.execute(
            'SELECT "timestamp" FROM asset_event WHERE id IN (%s, %s) ORDER BY id',
            [first.pk, second.pk],
        )
        read = column_values(AssetEvent, "timestamp", [value for (value,) in cursor.fetchall()])
    assert read == [first.timestamp, second.timestamp]
    assert column_values(AssetEvent, "timestamp", []) == []


@pytest.mark.parametrize(
    "value",
    [
        pytest.param([{"a": 1, "b": None, "c": [True, False], "d": 1.5}], id="row-set"),
        pytest.param([{"name": "ünïcode ✓ \u2028", "extra": {"nested": {"x": "y"}}}], id="text"),
        pytest.param([{"big": 2**70, "negative": -(2**70)}], id="beyond-64-bits"),
        pytest.param([{"ids": [1, 2, 3]}, {1: "a key that is no string"}], id="int-keys"),
        pytest.param([{"lone": "\ud800"}], id="lone-surrogate"),
        pytest.param([], id="empty"),
    ],
)
def test_json_text_is_the_json_value_the_standard_library_gives(value):
    assert json.loads(json_text(value)) == json.loads(json.dumps(value))


@pytest.mark.parametrize(
    "value",
    [
        pytest.param([{"at": datetime(2026, 1, 1, tzinfo=UTC)}], id="datetime"),
        pytest.param([{"amount": Decimal("1.5")}], id="decimal"),
        pytest.param([{"set": {1, 2}}], id="set"),
    ],
)
def test_json_text_refuses_what_the_standard_library_refuses(value):
    # a datetime must be adapted for the database first (Dialect.json_datetime)
    with pytest.raises(TypeError):
        json.dumps(value)
    with pytest.raises(TypeError):
        json_text(value)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("wanted", "found"),
    [
        pytest.param(["b", "c", "nope"], ["b", "c"], id="some"),
        pytest.param([], [], id="none"),
        pytest.param(["a'; DROP TABLE dag; --"], [], id="quotes-stay-values"),
    ],
)
def test_among_matches_a_column_against_many_values_on_both_databases(wanted, found):
    for dag_id in ("a", "b", "c"):
        DagFactory(dag_id=dag_id)
    sql = Dialect.current()
    among, values = sql.among(f"{table(Dag)}.dag_id", wanted, type="text")
    with statements_cursor() as cursor:
        sql.execute(
            cursor,
            f"SELECT dag_id FROM {table(Dag)} WHERE {among} ORDER BY dag_id",  # noqa: S608 - test
            [values],
        )
        assert [dag_id for (dag_id,) in cursor.fetchall()] == found
    assert Dag.objects.count() == 3
