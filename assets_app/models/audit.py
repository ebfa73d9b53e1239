"""The event log (Airflow's ``log`` table): who changed what, from which face.

One row per use case that changes state on an operator's behalf (a trigger, a pause, a clear,
a mark, a variable or connection written), recorded by the service in its own transaction
(``assets_app.services.audit``). Rows are append-only and outlive what they name: no foreign
keys, as in Airflow.
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from .common import ID_LENGTH


class EventLog(models.Model):
    """One recorded action: Airflow's ``Log`` (``owner`` is the user's name, ``extra`` the
    request's arguments as a JSON text, secrets masked)."""

    dttm = models.DateTimeField(default=timezone.now, editable=False)
    dag_id = models.CharField(max_length=ID_LENGTH, null=True, blank=True)  # noqa: DJ001
    task_id = models.CharField(max_length=ID_LENGTH, null=True, blank=True)  # noqa: DJ001
    map_index = models.IntegerField(null=True, blank=True)
    event = models.CharField(max_length=60)
    logical_date = models.DateTimeField(null=True, blank=True)
    run_id = models.CharField(max_length=ID_LENGTH, null=True, blank=True)  # noqa: DJ001
    owner = models.CharField(max_length=500, null=True, blank=True)  # noqa: DJ001
    owner_display_name = models.CharField(max_length=500, null=True, blank=True)  # noqa: DJ001
    extra = models.TextField(null=True, blank=True)  # noqa: DJ001
    try_number = models.IntegerField(null=True, blank=True)

    class Meta:
        db_table = "log"
        ordering = ["-dttm", "-id"]
        verbose_name = "event log"
        indexes = [
            models.Index(fields=["dttm"], name="idx_log_dttm"),
            models.Index(fields=["event"], name="idx_log_event"),
            models.Index(fields=["dag_id", "event"], name="idx_log_dag_event"),
            models.Index(
                fields=["dag_id", "task_id", "run_id", "map_index", "try_number"],
                name="idx_log_task_instance",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.event} by {self.owner} at {self.dttm:%Y-%m-%d %H:%M:%S}"
