"""The reference tables, the task state store and XComs lose the index of a foreign key that
begins their unique key (and its LIKE twin on PostgreSQL): declaring DAGs and writing XComs
and task state write an index entry fewer per row. Dropped as in 0017 and 0019 (``_indexes``:
the index only, not the foreign key)."""

import django.db.models.deletion
from django.db import migrations, models

from assets_app.migrations._indexes import single_column_indexes_operation

#: (table, column) whose single-column, non-unique indexes go
REDUNDANT = [
    ("asset_state_store", "asset_id"),
    ("dag_schedule_asset_alias_reference", "alias_id"),
    ("dag_schedule_asset_reference", "asset_id"),
    ("dag_task", "dag_id"),
    ("task_inlet_asset_reference", "asset_id"),
    ("task_leaf_reference", "dag_id"),
    ("task_outlet_asset_reference", "asset_id"),
    ("task_state_store", "dag_run_id"),
    ("xcom", "dag_run_id"),
]


class Migration(migrations.Migration):
    dependencies = [
        ("assets_app", "0020_hot_links_without_redundant_foreign_key_checks"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="assetstatestore",
                    name="asset",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="state",
                        to="assets_app.asset",
                    ),
                ),
                migrations.AlterField(
                    model_name="dagscheduleassetaliasreference",
                    name="alias",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="scheduled_dags",
                        to="assets_app.assetalias",
                    ),
                ),
                migrations.AlterField(
                    model_name="dagscheduleassetreference",
                    name="asset",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="scheduled_dags",
                        to="assets_app.asset",
                    ),
                ),
                migrations.AlterField(
                    model_name="dagtask",
                    name="dag",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="tasks",
                        to="assets_app.dag",
                    ),
                ),
                migrations.AlterField(
                    model_name="taskinletassetreference",
                    name="asset",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="consuming_tasks",
                        to="assets_app.asset",
                    ),
                ),
                migrations.AlterField(
                    model_name="taskleafreference",
                    name="dag",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        to="assets_app.dag",
                    ),
                ),
                migrations.AlterField(
                    model_name="taskoutletassetreference",
                    name="asset",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="producing_tasks",
                        to="assets_app.asset",
                    ),
                ),
                migrations.AlterField(
                    model_name="taskstatestore",
                    name="dag_run",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="task_state",
                        to="assets_app.dagrun",
                    ),
                ),
                migrations.AlterField(
                    model_name="xcom",
                    name="dag_run",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="xcoms",
                        to="assets_app.dagrun",
                    ),
                ),
            ],
            database_operations=[
                single_column_indexes_operation(REDUNDANT),
            ],
        ),
    ]
