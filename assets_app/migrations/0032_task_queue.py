"""Each task's Celery queue (Airflow's ``BaseOperator.queue``, default ``default``): where
``EXECUTOR=celery`` sends its task instances."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("assets_app", "0031_task_mapping"),
    ]

    operations = [
        migrations.AddField(
            model_name="dagtask",
            name="queue",
            field=models.CharField(default="default", max_length=256),
        ),
    ]
