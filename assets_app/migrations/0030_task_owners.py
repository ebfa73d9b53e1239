"""Each task's owner (Airflow's ``BaseOperator.owner``, default ``airflow``) and each DAG's
owners (its tasks', sorted, each once): a DAG declared before has its tasks owned by
``airflow``, as Airflow's default, until it is declared again."""

from typing import Any

from django.db import migrations, models


def owners_fill(apps: Any, schema_editor: Any) -> None:
    Dag = apps.get_model("assets_app", "Dag")
    DagTask = apps.get_model("assets_app", "DagTask")
    with_tasks = DagTask.objects.values("dag_id")
    Dag.objects.filter(dag_id__in=with_tasks).update(owners=["airflow"])


class Migration(migrations.Migration):
    dependencies = [
        ("assets_app", "0029_event_log"),
    ]

    operations = [
        migrations.AddField(
            model_name="dag",
            name="owners",
            field=models.JSONField(blank=True, default=list),
        ),
        migrations.AddField(
            model_name="dagtask",
            name="owner",
            field=models.CharField(default="airflow", max_length=500),
        ),
        migrations.RunPython(owners_fill, migrations.RunPython.noop, elidable=True),
    ]
