"""The hot tables lose the indexes another index's prefix already gives (by asset: the queue's
unique (asset_id, target_dag_id), asset_event's (asset_id, timestamp); by DAG: dag_run's
unique (dag_id, run_id); by run: dagrun_asset_event's unique (dag_run_id, event_id)) and the
queue's unused LIKE index on target_dag_id: fewer index writes for each event, queue row and
run. Only the indexes are dropped (``DROP INDEX``): Django's ``AlterField`` would also drop and
re-validate the foreign keys, a scan of each table under lock."""

import django.db.models.deletion
from django.db import migrations, models

from assets_app.migrations._indexes import (
    single_column_indexes_create,
    single_column_indexes_drop,
)

#: (table, column) whose single-column, non-unique indexes go
REDUNDANT = [
    ("asset_dag_run_queue", "asset_id"),
    ("asset_dag_run_queue", "target_dag_id"),  # after adrq_target_dag exists: kept by name
    ("asset_event", "asset_id"),
    ("dag_run", "dag_id"),
    ("dagrun_asset_event", "dag_run_id"),
]
KEPT = {"adrq_target_dag"}


def drop_redundant_indexes(apps, schema_editor):
    single_column_indexes_drop(schema_editor, REDUNDANT, kept=KEPT)


def recreate_indexes(apps, schema_editor):
    # adrq_target_dag (removed by the reversed AddIndex) is Django's own
    single_column_indexes_create(
        schema_editor, [tc for tc in REDUNDANT if tc != ("asset_dag_run_queue", "target_dag_id")]
    )


class Migration(migrations.Migration):
    dependencies = [
        ("assets_app", "0016_state_stores"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="assetdagrunqueue",
            index=models.Index(fields=["target_dag"], name="adrq_target_dag"),
        ),
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="assetdagrunqueue",
                    name="asset",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="queued_dags",
                        to="assets_app.asset",
                    ),
                ),
                migrations.AlterField(
                    model_name="assetdagrunqueue",
                    name="target_dag",
                    field=models.ForeignKey(
                        db_column="target_dag_id",
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="queued_assets",
                        to="assets_app.dag",
                    ),
                ),
                migrations.AlterField(
                    model_name="assetevent",
                    name="asset",
                    field=models.ForeignKey(
                        db_constraint=False,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="events",
                        to="assets_app.asset",
                    ),
                ),
                migrations.AlterField(
                    model_name="dagrun",
                    name="dag",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="runs",
                        to="assets_app.dag",
                    ),
                ),
                migrations.AlterField(
                    model_name="dagrunassetevent",
                    name="dag_run",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="event_links",
                        to="assets_app.dagrun",
                    ),
                ),
            ],
            database_operations=[
                migrations.RunPython(drop_redundant_indexes, recreate_indexes),
            ],
        ),
    ]
