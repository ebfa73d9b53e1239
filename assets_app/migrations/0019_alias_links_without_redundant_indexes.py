"""The alias link tables lose their index by alias, the prefix of their unique (alias_id,
asset_id) and (alias_id, event_id): 1,000 alias events wrote 2,000 index entries fewer.
Dropped by name as in 0017 (``DROP INDEX`` only: Django's ``AlterField`` would also drop and
re-validate the foreign keys, a scan of each table under lock)."""

import django.db.models.deletion
from django.db import migrations, models

#: (table, column) whose single-column, non-unique indexes go
REDUNDANT = [
    ("asset_alias_asset", "alias_id"),
    ("asset_alias_asset_event", "alias_id"),
]


def drop_redundant_indexes(apps, schema_editor):
    connection = schema_editor.connection
    with connection.cursor() as cursor:
        for table, column in REDUNDANT:
            constraints = connection.introspection.get_constraints(cursor, table)
            for name, info in constraints.items():
                if (
                    info["index"]
                    and not info["unique"]
                    and not info["primary_key"]
                    and info["columns"] == [column]
                ):
                    schema_editor.execute(f"DROP INDEX IF EXISTS {schema_editor.quote_name(name)}")


def recreate_indexes(apps, schema_editor):
    for table, column in REDUNDANT:
        name = schema_editor.quote_name(f"{table}_{column}_fk_idx")
        schema_editor.execute(
            f"CREATE INDEX IF NOT EXISTS {name} ON {schema_editor.quote_name(table)} "
            f"({schema_editor.quote_name(column)})"
        )


class Migration(migrations.Migration):
    dependencies = [
        ("assets_app", "0018_run_event_links_by_dag"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="assetaliasasset",
                    name="alias",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="asset_links",
                        to="assets_app.assetalias",
                    ),
                ),
                migrations.AlterField(
                    model_name="assetaliasassetevent",
                    name="alias",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="event_links",
                        to="assets_app.assetalias",
                    ),
                ),
            ],
            database_operations=[
                migrations.RunPython(drop_redundant_indexes, recreate_indexes),
            ],
        ),
    ]
