"""What tasks leave behind: XComs and the task and asset state stores."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from .assets import Asset
from .common import ID_LENGTH, composite_key
from .runs import DagRun, TaskKey


class XCom(TaskKey):
    """A value a task pushed (e.g. its ``return_value``)."""

    dag_run = models.ForeignKey(
        DagRun,
        on_delete=models.CASCADE,
        related_name="xcoms",
        db_index=False,  # by run: xcom_natural_key_unique's prefix
    )
    key = models.CharField(max_length=512)
    value = models.JSONField(null=True, blank=True)
    timestamp = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "xcom"
        verbose_name = "XCom"
        constraints = [
            models.UniqueConstraint(
                fields=["dag_run", "task_id", "map_index", "key"], name="xcom_natural_key_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.dag_id}.{self.task_id} {self.key}"


# --- task and asset state stores (Airflow's ``task_state_store`` / ``asset_state_store``) -----

#: Airflow's longest state store key (``String(512)``).
STATE_KEY_LENGTH = 512


class TaskStateStore(models.Model):
    """One key of a task's state store (``context["task_state_store"]``, Airflow 3.3's
    ``task_state_store``).

    Scoped to (run, task, map index), not to a try: every try of a task instance reads what
    an earlier one wrote (the point of the store: a retry reattaches to the job its first try
    submitted). Clearing the task instance keeps the rows, as in Airflow; they go with their
    DAG run. ``value`` is the JSON text of the value, as Airflow keeps it; ``expires_at``
    (``None``: never) is when ``state_store_clean`` may delete the row.
    """

    dag_run = models.ForeignKey(
        DagRun,
        on_delete=models.CASCADE,
        related_name="task_state",
        db_index=False,  # by run: task_state_store_uq's prefix
    )
    dag_id = models.CharField(max_length=ID_LENGTH)
    run_id = models.CharField(max_length=ID_LENGTH)
    task_id = models.CharField(max_length=ID_LENGTH)
    map_index = models.IntegerField(default=-1)
    key = models.CharField(max_length=STATE_KEY_LENGTH)
    value = models.TextField()
    updated_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "task_state_store"
        ordering = ["dag_id", "run_id", "task_id", "map_index", "key"]
        verbose_name = "task state store key"
        constraints = [
            models.UniqueConstraint(
                fields=["dag_run", "task_id", "map_index", "key"], name="task_state_store_uq"
            ),
        ]
        indexes = [
            models.Index(
                fields=["dag_id", "run_id", "task_id", "map_index"],
                name="idx_task_state_store_lookup",
            ),
            models.Index(fields=["expires_at"], name="idx_task_state_store_expires"),
        ]

    def __str__(self) -> str:
        return f"{self.dag_id}.{self.task_id} @ {self.run_id}: {self.key}"


class AssetStateStore(models.Model):
    """One key of an asset's state store (``context["asset_state_store"][asset]``, Airflow
    3.3's ``asset_state_store``): a watermark written in one run is read by the next.

    The rows go with their asset, and when the asset stops being active (no DAG declares it
    any more), as Airflow's scheduler removes them. ``last_updated_by_*`` name the task that
    wrote last (no foreign key: the names outlive the run).
    """

    asset = models.ForeignKey(
        Asset,
        on_delete=models.CASCADE,
        related_name="state",
        db_index=False,  # by asset: asset_state_store_uq's prefix
    )
    key = models.CharField(max_length=STATE_KEY_LENGTH)
    value = models.TextField()
    updated_at = models.DateTimeField(default=timezone.now)
    last_updated_by_kind = models.CharField(max_length=16, null=True, blank=True)  # noqa: DJ001
    last_updated_by_dag_id = models.CharField(max_length=ID_LENGTH, null=True, blank=True)  # noqa: DJ001
    last_updated_by_run_id = models.CharField(max_length=ID_LENGTH, null=True, blank=True)  # noqa: DJ001
    last_updated_by_task_id = models.CharField(max_length=ID_LENGTH, null=True, blank=True)  # noqa: DJ001
    last_updated_by_map_index = models.IntegerField(null=True, blank=True)

    class Meta:
        db_table = "asset_state_store"
        ordering = ["asset", "key"]
        verbose_name = "asset state store key"
        constraints = composite_key("asset", "key", name="asset_state_store_uq")

    def __str__(self) -> str:
        return f"asset {self.asset_id}: {self.key}"
