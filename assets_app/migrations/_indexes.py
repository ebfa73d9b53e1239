"""What the migrations that drop redundant indexes share (0017, 0019, 0021). Not a migration:
the loader skips modules whose name starts with ``_``.

A foreign key's own single-column index is redundant when another index begins with that
column. Only the index is dropped (``DROP INDEX``): Django's ``AlterField(db_index=False)``
would also drop and re-validate the foreign key, a scan of the table under lock, so the
migrations change the field in the state only and drop the index here, found by its columns
(Django's generated names differ between databases).
"""

from collections.abc import Collection, Iterable, Sequence

from django.db import migrations


def single_column_indexes_drop(
    schema_editor, columns: Iterable[tuple[str, str]], *, kept: Collection[str] = ()
) -> None:
    """Drop every non-unique index on exactly ``(table, column)`` of ``columns``, except those
    named in ``kept``."""
    connection = schema_editor.connection
    with connection.cursor() as cursor:
        for table, column in columns:
            constraints = connection.introspection.get_constraints(cursor, table)
            for name, info in constraints.items():
                if (
                    info["index"]
                    and not info["unique"]
                    and not info["primary_key"]
                    and info["columns"] == [column]
                    and name not in kept
                ):
                    schema_editor.execute(f"DROP INDEX IF EXISTS {schema_editor.quote_name(name)}")


def single_column_indexes_create(schema_editor, columns: Iterable[tuple[str, str]]) -> None:
    """The reverse: an index ``<table>_<column>_fk_idx`` on each ``(table, column)``."""
    for table, column in columns:
        name = schema_editor.quote_name(f"{table}_{column}_fk_idx")
        schema_editor.execute(
            f"CREATE INDEX IF NOT EXISTS {name} ON {schema_editor.quote_name(table)} "
            f"({schema_editor.quote_name(column)})"
        )


def single_column_indexes_operation(columns: Sequence[tuple[str, str]]) -> migrations.RunPython:
    """The operation of a migration that drops the indexes of ``columns``
    (:func:`single_column_indexes_drop`) and creates them again when reversed."""

    def drop(apps, schema_editor) -> None:
        single_column_indexes_drop(schema_editor, columns)

    def create(apps, schema_editor) -> None:
        single_column_indexes_create(schema_editor, columns)

    return migrations.RunPython(drop, create)
