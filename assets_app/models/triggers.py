"""Triggers of deferred task instances and the triggerers that run them (Airflow's
``trigger`` table and its triggerer jobs; docs/triggerer.md)."""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class Triggerer(models.Model):
    """One ``manage.py triggerer`` process (Airflow's triggerer ``Job`` row): alive while its
    ``heartbeat`` is younger than ``TRIGGERER_HEALTH_CHECK_THRESHOLD``; the triggers it
    claimed move to a live one when it is not."""

    hostname = models.CharField(max_length=1000, default="", blank=True)
    pid = models.IntegerField(null=True, blank=True)
    capacity = models.IntegerField(default=0)
    started_at = models.DateTimeField(default=timezone.now)
    heartbeat = models.DateTimeField(default=timezone.now)
    #: set when it stopped cleanly (its triggers were handed back at once)
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "triggerer"
        indexes = [models.Index(fields=["heartbeat"], name="triggerer_heartbeat")]

    def __str__(self) -> str:
        return f"triggerer {self.pk} ({self.hostname} pid {self.pid})"


class Trigger(models.Model):
    """What a deferred task instance waits on: a trigger class (``classpath``) and its
    serialized constructor arguments (``kwargs``: the JSON text of the SDK's serde form, as
    Airflow keeps it). Run by the one triggerer that claimed it (``triggerer``); deleted
    when no deferred task instance waits on it any more."""

    classpath = models.CharField(max_length=1000)
    kwargs = models.TextField()
    created_date = models.DateTimeField(default=timezone.now)
    triggerer = models.ForeignKey(
        Triggerer,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="triggers",
        db_index=True,
    )
    queue = models.CharField(max_length=256, null=True, blank=True)  # noqa: DJ001 - Airflow's: null

    class Meta:
        db_table = "trigger"
        ordering = ["id"]

    def __str__(self) -> str:
        return f"trigger {self.pk} ({self.classpath})"
