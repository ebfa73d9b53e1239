"""The alias link tables lose their index by alias, the prefix of their unique (alias_id,
asset_id) and (alias_id, event_id): 1,000 alias events wrote 2,000 index entries fewer.
Dropped as in 0017 (``_indexes``: the index only, not the foreign key)."""

import django.db.models.deletion
from django.db import migrations, models

from assets_app.migrations._indexes import single_column_indexes_operation

#: (table, column) whose single-column, non-unique indexes go
REDUNDANT = [
    ("asset_alias_asset", "alias_id"),
    ("asset_alias_asset_event", "alias_id"),
]


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
                single_column_indexes_operation(REDUNDANT),
            ],
        ),
    ]
