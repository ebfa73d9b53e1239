"""Task logs: what each try of a task printed, shipped to the server by the worker while the
try runs (``runtime.log_shipping``) and kept with the DAG run (docs/worker.md, "Reading a
task's log").

One ``TaskLog`` row per try, holding the counters the append service locks and checks, and
its text in ``TaskLogChunk`` rows, one per append, in order: appending is an ``INSERT``, never
a rewrite of what is stored, and reading streams the chunks without loading the whole log.
Both go with their run (foreign keys that cascade).
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from .common import composite_key
from .runs import DagRun, TaskKey


class TaskLog(TaskKey):
    """The log of one try of a task instance: where it stands and whether it is complete.

    ``task_instance_id`` is the id that try has (or had, once it is history): the ``sub`` of
    the token its shipper authenticates with. ``received_bytes`` counts the UTF-8 bytes the
    shipper sent (the offset its next append must give), ``stored_bytes`` the bytes kept
    (masked), at most ``TASK_LOG_MAX_BYTES`` and the truncation marker.
    """

    dag_run = models.ForeignKey(DagRun, on_delete=models.CASCADE, related_name="task_logs")
    task_instance_id = models.UUIDField(unique=True)
    try_number = models.IntegerField()
    received_bytes = models.BigIntegerField(default=0)
    stored_bytes = models.BigIntegerField(default=0)
    #: the ``seq`` of the last chunk (0: none yet)
    chunk_count = models.IntegerField(default=0)
    #: the cap was reached: the marker line is stored, later output is counted and dropped
    truncated = models.BooleanField(default=False)
    #: the shipper sent its last chunk (the try's process has ended); a later append reopens it
    closed = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "task_log"
        ordering = ["dag_id", "run_id", "task_id", "map_index", "try_number"]
        verbose_name = "task log"
        constraints = [
            models.UniqueConstraint(
                fields=["dag_id", "run_id", "task_id", "map_index", "try_number"],
                name="task_log_try_unique",
            ),
        ]

    def __str__(self) -> str:
        return f"log of {self.task_label} try {self.try_number}"


class TaskLogChunk(models.Model):
    """One append to a try's log: its text, masked, after the chunks before it (``seq``)."""

    # by log: the prefix of the unique (log_id, seq)
    log = models.ForeignKey(
        TaskLog, on_delete=models.CASCADE, related_name="chunks", db_index=False
    )
    seq = models.IntegerField()
    content = models.TextField()

    class Meta:
        db_table = "task_log_chunk"
        ordering = ["log", "seq"]
        verbose_name = "task log chunk"
        constraints = composite_key("log", "seq", name="task_log_chunk_seq_unique")

    def __str__(self) -> str:
        return f"chunk {self.seq} of task log {self.log_id}"
