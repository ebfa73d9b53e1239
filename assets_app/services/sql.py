"""The small SQL dialect layer of the hand-written statements of the hot path: the set-based
statements in ``registration``, finishing a task instance and settling its run.

What differs between PostgreSQL and SQLite is how a JSON array parameter becomes a row set
(PostgreSQL ``jsonb_to_recordset``, SQLite ``json_each``/``json_extract``), how new ids are
handed out, and that PostgreSQL takes several independent writes as one statement
(``Dialect.execute_all``); everything else is written once. Table and column names, and the
PostgreSQL types of the row sets, come from the models (``Field.column``, ``Field.db_type``),
so a renamed column or a changed type is picked up here. Any other database is refused with
:class:`UnsupportedDatabaseError` instead of being sent SQL it cannot run.

JSON columns are ``jsonb`` on PostgreSQL and ``text`` on SQLite (Django's ``JSONField``), and
``json_extract`` returns an object member as JSON text, so both store what the ORM reads back.
Datetimes go through Django's own adaptation.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar, cast

import orjson
from django.core.exceptions import ImproperlyConfigured
from django.db import connection, connections, models
from django.db.backends.utils import CursorWrapper
from django.db.models.base import ModelState
from django.db.models.expressions import Col
from django.utils import timezone

SUPPORTED_VENDORS = ("postgresql", "sqlite")

_M = TypeVar("_M", bound=models.Model)


class UnsupportedDatabaseError(ImproperlyConfigured):
    """The registration statements are written for PostgreSQL and SQLite only.

    A deployment error, not a client's: ``manage.py check`` (and so ``migrate``/``runserver``)
    reports it first, see ``assets_app.checks``.
    """


def unsupported_database_message(vendor: str) -> str:
    return (
        f"the asset registry supports PostgreSQL and SQLite, not {vendor!r} "
        "(set DATABASE_URL to a postgres:// or sqlite:// URL)"
    )


def table(model: type[models.Model]) -> str:
    """The model's table name."""
    return model._meta.db_table  # plain identifiers, as the models name them


def _field(model: type[models.Model], field_name: str) -> tuple[str, models.Field[Any, Any]]:
    """``(column name, field)`` of a concrete field."""
    field = model._meta.get_field(field_name)
    if not isinstance(field, models.Field) or field.column is None:
        raise TypeError(f"{model.__name__}.{field_name} is not a concrete column")
    return field.column, field


def column_name(model: type[models.Model], field_name: str) -> str:
    """The column of ``model.field_name`` (``"asset"`` → ``asset_id``), unquoted: a row set's
    member (see ``Dialect.rows``)."""
    return _field(model, field_name)[0]


def column(model: type[models.Model], field_name: str) -> str:
    """The column of ``model.field_name`` (``"asset"`` → ``asset_id``), quoted."""
    return _column(connection.vendor, model, field_name)


@functools.cache  # on every request's path: names are looked up once per process
def _column(vendor: str, model: type[models.Model], field_name: str) -> str:
    return connection.ops.quote_name(column_name(model, field_name))


def of(alias: str, model: type[models.Model]) -> Callable[[str], str]:
    """``of("d", Dag)("dag_id")`` → ``d."dag_id"``: a column of ``model`` under a table alias,
    named as the model names it."""
    return lambda field_name: f"{alias}.{column(model, field_name)}"


def columns(model: type[models.Model], *field_names: str) -> str:
    """A comma-separated, quoted column list for an ``INSERT`` or a ``SELECT``."""
    return ", ".join(column(model, name) for name in field_names)


@dataclass(frozen=True)
class Statement:
    """One SQL statement and its parameters, in the order of their placeholders."""

    text: str
    params: Sequence[Any]


@dataclass(frozen=True)
class Steps:
    """A statement written as named steps and a last part, ``WITH n1 AS (…), n2 AS (…) last``,
    so that statements join into one (:meth:`then`).

    PostgreSQL refuses a data-modifying ``WITH`` inside another statement's step, so two such
    statements cannot nest: joined, their steps stand side by side at the top level, and the
    caller writes the last part over their names (the steps' names must differ). A step's and
    the last part's parameters follow in the order of the text.
    """

    steps: tuple[tuple[str, Statement], ...]
    last: Statement

    def then(self, other: Steps, last: Statement) -> Steps:
        """``self``'s steps, then ``other``'s, and ``last`` over them (PostgreSQL: the steps
        all see the same snapshot, as in :meth:`Dialect.execute_all`)."""
        names = [name for name, _ in (*self.steps, *other.steps)]
        if len(set(names)) != len(names):
            raise ValueError(f"steps of joined statements share a name: {names}")
        return Steps(steps=(*self.steps, *other.steps), last=last)

    def statement(self) -> Statement:
        """The one statement (a plain one when there is no step)."""
        steps = ", ".join(f"{name} AS ({' '.join(st.text.split())})" for name, st in self.steps)
        text = " ".join(self.last.text.split())
        params = [param for _, st in self.steps for param in st.params]
        return Statement(f"WITH {steps} {text}" if steps else text, [*params, *self.last.params])


def _as_one(statements: Sequence[Statement]) -> Statement:
    """All but the last statement as data-modifying CTEs of the last (PostgreSQL)."""
    *first, last = statements
    ctes = ", ".join(f"s{n} AS ({' '.join(st.text.split())})" for n, st in enumerate(first))
    text = " ".join(last.text.split())
    nested = text[:5].upper() == "WITH "  # the last one's own CTEs join the list
    text = f"WITH {ctes}, {text[5:]}" if nested else f"WITH {ctes} {text}"
    return Statement(text, [param for st in statements for param in st.params])


@dataclass(frozen=True)
class Dialect:
    """PostgreSQL or SQLite, for the connection in use."""

    vendor: str

    @classmethod
    def current(cls) -> Dialect:
        if connection.vendor not in SUPPORTED_VENDORS:
            raise UnsupportedDatabaseError(unsupported_database_message(connection.vendor))
        return cls(vendor=connection.vendor)

    @property
    def postgresql(self) -> bool:
        return self.vendor == "postgresql"

    def rows(
        self,
        model: type[models.Model] | None = None,
        fields: Sequence[str] = (),
        **extra: str,
    ) -> str:
        """A ``FROM`` item named ``r``: the statement's JSON parameter as typed rows.

        Each row has a member per field of ``model`` in ``fields`` (named after the field's
        column, typed like it) and per ``extra`` name (with the given PostgreSQL type); a member
        an object lacks is ``NULL``. SQLite is dynamically typed and needs no types.
        """
        return _rows(self.vendor, model, tuple(fields), tuple(extra.items()))

    def next_ids(self, model: type[models.Model]) -> str:
        """An expression giving each row of a ``SELECT`` a new id of ``model``'s sequence.

        PostgreSQL only: evaluated once per row where it appears (``nextval`` is volatile, so a
        CTE selecting it is materialized), which lets a statement know which new id belongs to
        which input row exactly.
        """
        assert self.postgresql, "SQLite hands out ids in insert order (see registration)"  # noqa: S101 - a caller's bug, not input
        pk = model._meta.pk
        assert pk is not None  # noqa: S101 - narrows the type for mypy
        return f"nextval(pg_get_serial_sequence('{model._meta.db_table}', '{pk.column}'))"

    def seconds_between(self, later: str, earlier: str) -> str:
        """SQL for ``later - earlier`` in seconds (``NULL`` if either is), exact to the
        microsecond as ``timedelta.total_seconds``; SQLite uses the function Django registers
        for its own datetime subtraction."""
        if self.postgresql:
            return f"EXTRACT(EPOCH FROM ({later} - {earlier}))"
        return f"django_timestamp_diff({later}, {earlier}) / 1000000.0"

    @staticmethod
    def execute(cursor: CursorWrapper, statement: str, params: Sequence[Any]) -> None:
        """Run ``statement`` written on one line (as logs and ``pg_stat_activity`` show it)."""
        cursor.execute(" ".join(statement.split()), params)

    def execute_all(self, cursor: CursorWrapper, statements: Iterable[Statement | None]) -> None:
        """Run ``statements`` in order, skipping the ``None`` ones (nothing to do); the cursor
        holds the last one's result.

        PostgreSQL receives them as **one** statement, all but the last as data-modifying
        CTEs: one round trip, and they all see the same snapshot, so use it only for
        statements that do not read each other's rows (foreign keys are checked at the end of
        the statement). SQLite runs them one by one.
        """
        todo = [st for st in statements if st is not None]
        if self.postgresql and len(todo) > 1:
            todo = [_as_one(todo)]
        for st in todo:
            self.execute(cursor, st.text, st.params)

    @property
    def probe(self) -> str:
        """Ends an ``EXISTS`` / ``NOT EXISTS`` subquery so that it stays one index probe per
        outer row, whatever the statistics.

        Without it PostgreSQL may turn the subquery into a (anti-)join and, for a row set's
        default estimate of 100 rows and a table whose statistics lag behind its growth (or
        that is full of dead rows, as the queue), plan a hash join over the whole table.
        ``OFFSET 0`` keeps the subquery a correlated subplan (PostgreSQL does not pull up a
        sublink with an ``OFFSET``). SQLite always probes (and has no ``OFFSET`` without
        ``LIMIT``).
        """
        return "OFFSET 0" if self.postgresql else ""

    def probe_join(self, table: str, alias: str, on: str, *, lock: str = "") -> str:
        """``JOIN table alias ON on`` as one index probe per row of the left side; ``lock``, a
        PostgreSQL locking clause (``FOR UPDATE SKIP LOCKED``), locks the joined rows of
        ``table``. SQLite always probes (and its transactions are exclusive: no lock).

        A row set (:meth:`rows`) is estimated at 100 rows whatever its size, and for 100 rows
        PostgreSQL may plan a plain join with a large table as a hash join that reads the
        whole table. A ``LATERAL`` subquery with ``OFFSET 0`` is not pulled up, so it runs per
        left row. Only for statements planned at every call (``statements_cursor(prepare=
        False)``): each probe is then planned for the table's current size, and uses its
        index. In a prepared plan made while the table was small, each probe stays a read of
        the whole table once it has grown: per row, far worse than the hash join (seen with
        the asset lookup of 1,000 alias targets: 0.4 s instead of 5 ms).
        """
        if self.postgresql:
            probed = f"SELECT * FROM {table} {alias} WHERE {on} {self.probe} {lock}"  # noqa: S608 - names from the models
            return f"CROSS JOIN LATERAL ({probed}) {alias}"
        return f"JOIN {table} {alias} ON {on}"

    def among(self, expression: str, values: Iterable[int | str], *, type: str) -> tuple[str, Any]:
        """A condition that ``expression`` is one of ``values`` (of PostgreSQL type ``type``,
        e.g. ``bigint`` or ``text``), and its parameter.

        One index probe per value: PostgreSQL's ``= ANY`` of an array is an index condition
        (a join with a row set may be planned as a hash join reading the whole table), SQLite
        probes per member of ``json_each``. Short and the same text whatever the number of
        values, so it stays prepared (an ORM ``__in`` compiles one placeholder per value).
        """
        if self.postgresql:
            return f"{expression} = ANY(%s::{type}[])", list(values)
        return f"{expression} IN (SELECT value FROM json_each(%s))", json_text(list(values))  # noqa: S608 - an expression from the models, values bound as parameters

    def joined_integers(self, expression: str) -> str:
        """An aggregate: the integer ``expression`` of a group's rows, comma-separated."""
        if self.postgresql:
            return f"string_agg(({expression})::text, ',')"
        return f"group_concat({expression}, ',')"

    def json_datetime(self, value: datetime) -> Any:
        """``value`` as the database compares it with a datetime column, inside a JSON
        parameter (a row set's member). PostgreSQL takes an aware datetime as it is (Django
        adapts nothing), so its ISO form; SQLite's is Django's adaptation (naive, in UTC)."""
        if self.postgresql:
            return value.isoformat()
        adapted = connection.ops.adapt_datetimefield_value(value)
        return adapted.isoformat() if isinstance(adapted, datetime) else adapted

    @staticmethod
    def json(rows: Iterable[Mapping[str, Any]]) -> str:
        """``rows`` as the JSON text of a row set's parameter (see :func:`json_text`)."""
        return json_text(list(rows))

    @staticmethod
    def datetime(value: datetime) -> Any:
        return connection.ops.adapt_datetimefield_value(value)


#: what ``orjson`` must not turn into JSON on its own: a datetime must come through
#: :meth:`Dialect.json_datetime` (SQLite compares naive UTC text), a dataclass is a caller's bug
_ORJSON_STRICT = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS


def json_text(value: Any) -> str:
    """``value`` as compact JSON text: the JSON value ``json.dumps`` gives.

    The hot path's row sets are encoded by ``orjson``, at a tenth of the standard library's
    cost (encoding was a tenth of the scheduler's CPU). What ``orjson`` refuses and the
    standard library takes (integers beyond 64 bits, keys that are not strings, text that is
    not valid UTF-8) goes to the standard library, so such values and their errors stay as
    they were. ``NaN`` and the infinities, which are not JSON, become ``null`` instead of text
    the database refuses; every input face refuses them first
    (:mod:`assets_app.validators`).
    """
    try:
        return orjson.dumps(value, option=_ORJSON_STRICT).decode()
    except TypeError:  # orjson.JSONEncodeError too
        return json.dumps(value, separators=(",", ":"))


@contextmanager
def statements_cursor(*, prepare: bool = True) -> Iterator[CursorWrapper]:
    """A cursor for the hand-written statements (``connection.cursor()`` otherwise).

    On PostgreSQL it binds parameters on the server, so that psycopg **prepares** a statement
    it has run ``prepare_threshold`` times on the connection (``OPTIONS`` of the database
    settings; ``None``: never): PostgreSQL then parses and plans it once per connection
    instead of once per call. The hot path's statements are long (``WITH`` steps over JSON row
    sets) and the same text at every call, so their planning cost more than running them
    (finishing a task instance: 0.7 ms of planning for 0.3 ms of execution). The ORM keeps
    Django's client-side binding, whose statements are never prepared.

    ``prepare=False``: planned at every call, for the statements over a table whose size
    swings by orders of magnitude within seconds (``asset_dag_run_queue``: empty when the
    schedulers keep up, tens of thousands of rows in a burst). A prepared statement keeps the
    plan it got when it was prepared, sized for the table as it was then, until the table is
    next analyzed: the queue rows' delete, prepared on an almost empty queue, filtered all
    11,000 rows of the grown queue by each of its 418 ids (100 ms per batch) seconds later.
    """
    if connection.vendor != "postgresql":
        with connection.cursor() as plain:
            yield plain
        return
    # what connection.cursor() does, with another cursor class: the health check of a
    # persistent connection (CONN_HEALTH_CHECKS: a broken one is replaced, not used), connect
    # if need be, then Django's wrapper (query logging, execute wrappers, error translation)
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    # a backend may bring its own (the benchmarks' counts the statements it sends)
    factory = getattr(connection, "binding_cursor_factory", None) or _binding_cursor_factory()
    if not prepare:
        factory = _unprepared(factory)
    with connection.wrap_database_errors:
        raw = factory(connection.connection)
        connection.validate_thread_sharing()
        logged = connection.queries_logged
        wrapped = connection.make_debug_cursor(raw) if logged else connection.make_cursor(raw)
    with wrapped as bound:
        yield bound


@functools.cache  # once per process
def _binding_cursor_factory() -> Callable[[Any], Any]:
    """Django's server-side binding cursor (psycopg 3; imported only on PostgreSQL)."""
    from django.db.backends.postgresql.base import ServerBindingCursor

    return cast("Callable[[Any], Any]", ServerBindingCursor)


@functools.lru_cache(maxsize=8)  # per cursor class (one per process, or per benchmark connection)
def _unprepared(cursor_class: Any) -> Any:
    """``cursor_class`` that never prepares what it runs (psycopg's ``prepare=False``)."""

    class Unprepared(cursor_class):  # type: ignore[misc]
        def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
            return super().execute(query, params, **{**kwargs, "prepare": False})

    return Unprepared


#: Callable defaults whose one value serves every row of an ``INSERT`` (``model_rows_insert``).
_SHARED = (timezone.now, dict, list)


def model_rows_insert(
    model: type[models.Model], rows: Sequence[Mapping[str, Any]], *, returning: Sequence[str] = ()
) -> list[tuple[Any, ...]]:
    """``INSERT`` rows of ``model`` in one statement; the ``returning`` fields of the new rows.

    Each row maps the same field names to values ready for JSON (ids, strings, datetimes
    through :meth:`Dialect.json_datetime`); every other column but an auto-incremented id gets its
    field's default (``auto_now`` fields: now), the same for every row, so a field whose
    default must differ per row (``uuid.uuid4``) must be given (``ValueError`` otherwise).
    What ``bulk_create`` does, without preparing every field of every object one by one.
    """
    named = list(rows[0])
    columns = [column_name(model, name) for name in named]
    others = [
        field
        for field in model._meta.concrete_fields
        if field.name not in named and not getattr(field, "db_returning", False)
    ]
    per_row = [
        field.name
        for field in others
        if field.has_default() and callable(field.default) and field.default not in _SHARED
    ]
    if per_row:
        raise ValueError(f"{model.__name__} rows must give {', '.join(per_row)} (default per row)")
    defaults = [
        field.get_db_prep_save(
            timezone.now() if getattr(field, "auto_now", False) else field.get_default(),
            connection,
        )
        for field in others
    ]
    sql = Dialect.current()
    quote = connection.ops.quote_name
    targets = [*columns, *(column_name(model, f.name) for f in others)]
    statement = (
        f"INSERT INTO {table(model)} "  # noqa: S608 - names from the models, values bound as parameters
        f"({', '.join(quote(c) for c in targets)}) "
        f"SELECT {', '.join([f'r.{quote(c)}' for c in columns] + ['%s'] * len(others))} "
        f"FROM {sql.rows(model, named)}"
    )
    if returning:
        statement += " RETURNING " + ", ".join(quote(column_name(model, n)) for n in returning)
    with statements_cursor() as db:
        sql.execute(
            db,
            statement,
            [
                *defaults,
                sql.json(
                    {column: row[name] for name, column in zip(named, columns, strict=True)}
                    for row in rows
                ),
            ],
        )
        return db.fetchall() if returning else []


def rows_statement(statement: str, rows: Sequence[Mapping[str, Any]], **columns: str) -> None:
    """Run ``statement`` with its ``{rows}`` the given rows, passed as one JSON parameter.

    Rows by the thousand without a parameter (and its conversion) per value; see
    :class:`assets_app.services.sql.Dialect`. ``columns``: each row member's PostgreSQL type.
    """
    sql = Dialect.current()
    with statements_cursor() as db:
        sql.execute(db, statement.format(rows=sql.rows(None, (), **columns)), [sql.json(rows)])


def model_from_row(
    model: type[_M], fields: Sequence[str], values: Sequence[Any], *, from_database: bool = True
) -> _M:
    """A saved ``model`` instance with ``fields`` set (see :func:`models_from_rows`)."""
    return models_from_rows(model, fields, [values], from_database=from_database)[0]


def column_values(model: type[models.Model], field_name: str, values: Iterable[Any]) -> list[Any]:
    """Values of ``model.field_name`` read from the database, converted as the ORM converts
    them (see :func:`models_from_rows`; nothing to do for most columns on PostgreSQL), without
    an instance per value."""
    _, converting = _row_plan(model, (field_name,), connection.vendor, True)
    if not converting:
        return list(values)
    ((_, col, converters),) = converting
    real_connection = connections[connection.alias]
    converted = []
    for value in values:
        for converter in converters:
            value = converter(value, col, real_connection)
        converted.append(value)
    return converted


def models_from_rows(
    model: type[_M],
    fields: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    from_database: bool = True,
) -> list[_M]:
    """Saved ``model`` instances, one per row of values for ``fields``, as the ORM's
    ``Model.from_db`` builds them for ``.only(*fields)``: the fields left out are deferred.

    ``values`` come from the database (converted as the ORM converts them, e.g. JSON text on
    SQLite) unless ``from_database`` is false (Python values, as written). Rows by the
    thousand (alias events): the field plan is built once per process, each instance is made
    without ``Model.__init__`` (as unpickling does: no signals, no defaults for the deferred
    fields) — what ``from_db`` would make, at a quarter of the cost.
    """
    db = connection.alias
    attnames, converting = _row_plan(model, tuple(fields), connection.vendor, from_database)
    real_connection = connections[db]
    made = []
    for values in rows:
        if converting:
            values = list(values)
            for at, col, converters in converting:
                for converter in converters:
                    values[at] = converter(values[at], col, real_connection)
        instance = model.__new__(model)
        instance.__dict__.update(zip(attnames, values, strict=True))
        state = instance._state = ModelState()
        state.adding = False
        state.db = db
        made.append(instance)
    return made


@functools.cache  # per model and field list: built once per process
def _row_plan(
    model: type[models.Model], fields: tuple[str, ...], vendor: str, from_database: bool
) -> tuple[tuple[str, ...], tuple[tuple[int, Col, tuple[Any, ...]], ...]]:
    """The attribute name of each of ``fields`` and, for the values read from ``vendor``'s
    database, the converters the ORM applies to the fields' columns, the backend's (SQLite's
    datetimes, read as text) and the field's own, as its compiler does (by position)."""
    attnames, converting = [], []
    for at, name in enumerate(fields):
        field = model._meta.get_field(name)
        if not field.concrete or field.attname is None:
            raise ValueError(f"{model.__name__}.{name} is no column")
        attnames.append(field.attname)
        if from_database:
            col = field.get_col(model._meta.db_table)
            converters = (
                *connection.ops.get_db_converters(col),
                *col.get_db_converters(connection),
            )
            if converters:
                converting.append((at, col, converters))
    return tuple(attnames), tuple(converting)


@functools.cache  # on every request's path: built once per process
def _rows(
    vendor: str,
    model: type[models.Model] | None,
    fields: tuple[str, ...],
    extra: tuple[tuple[str, str], ...],
) -> str:
    types: dict[str, str] = {}
    for name in fields:
        assert model is not None  # noqa: S101 - narrows the type for mypy
        name_in_row, field = _field(model, name)
        types[name_in_row] = _base_type(field.db_type(connection) or "text")
    types.update(extra)
    if vendor == "postgresql":
        spec = ", ".join(f"{connection.ops.quote_name(n)} {t}" for n, t in types.items())
        return f"jsonb_to_recordset(%s::jsonb) AS r({spec})"
    picks = ", ".join(
        f"json_extract(value, '$.{n}') AS {connection.ops.quote_name(n)}" for n in types
    )
    return f"(SELECT {picks} FROM json_each(%s)) AS r"  # noqa: S608 - names from the models, values bound as parameters


def _base_type(db_type: str) -> str:
    """``varchar(1500)`` → ``varchar``: a row set's member needs no length."""
    return db_type.split("(", 1)[0]
