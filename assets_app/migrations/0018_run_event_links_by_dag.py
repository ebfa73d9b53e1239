"""``dagrun_asset_event.dag_id``: the consuming run's DAG, copied onto each link, with an index
(event_id, dag_id) in place of the one on event_id. "Has a run of this DAG consumed the event"
becomes one index probe instead of a walk over every run that consumed the event (the
scheduler asks it of each candidate event of each run it creates)."""

from django.db import migrations, models

BACKFILL = """
UPDATE dagrun_asset_event SET dag_id = (
    SELECT dag_run.dag_id FROM dag_run WHERE dag_run.id = dagrun_asset_event.dag_run_id
)
"""


def drop_event_index(apps, schema_editor):
    """The single-column index on event_id (Django's name for it), now dagrun_event_dag's
    prefix; only the index: ``AlterField`` would also re-validate the foreign key."""
    connection = schema_editor.connection
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, "dagrun_asset_event")
    for name, info in constraints.items():
        if info["index"] and not info["unique"] and info["columns"] == ["event_id"]:
            schema_editor.execute(f"DROP INDEX IF EXISTS {schema_editor.quote_name(name)}")


def recreate_event_index(apps, schema_editor):
    schema_editor.execute(
        "CREATE INDEX IF NOT EXISTS dagrun_asset_event_event_id_fk_idx "
        "ON dagrun_asset_event (event_id)"
    )


class Migration(migrations.Migration):
    dependencies = [
        ("assets_app", "0017_hot_tables_without_redundant_indexes"),
    ]

    operations = [
        migrations.AddField(
            model_name="dagrunassetevent",
            name="dag_id",
            field=models.CharField(default="", editable=False, max_length=250),
            preserve_default=False,
        ),
        migrations.RunSQL(BACKFILL, migrations.RunSQL.noop),
        migrations.AddIndex(
            model_name="dagrunassetevent",
            index=models.Index(fields=["event", "dag_id"], name="dagrun_event_dag"),
        ),
        migrations.AddConstraint(
            model_name="dagrunassetevent",
            constraint=models.CheckConstraint(
                condition=~models.Q(dag_id=""), name="dagrun_event_dag_set"
            ),
        ),
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="dagrunassetevent",
                    name="event",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=models.deletion.CASCADE,
                        related_name="dagrun_links",
                        to="assets_app.assetevent",
                    ),
                ),
            ],
            database_operations=[migrations.RunPython(drop_event_index, recreate_event_index)],
        ),
    ]
