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


class AssetWatcher(models.Model):
    """An asset's watcher whose trigger runs now (Airflow's ``asset_watcher``): an
    ``AssetWatcher(name, trigger)`` a DAG file declares on an asset that an unpaused DAG
    schedules on. The row and its trigger exist only while that holds
    (``services.runs.watchers.asset_watchers_sync``); every event of the trigger becomes
    an asset event on ``asset``."""

    asset = models.ForeignKey(
        "assets_app.Asset",
        on_delete=models.CASCADE,
        related_name="watchers",
        db_index=False,  # by asset: asset_watcher_asset_trigger_unique's prefix
    )
    trigger = models.ForeignKey(Trigger, on_delete=models.CASCADE, related_name="asset_watchers")
    name = models.CharField(max_length=1500)
    created_date = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "asset_watcher"
        ordering = ["asset_id", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["asset", "trigger"], name="asset_watcher_asset_trigger_unique"
            )
        ]

    def __str__(self) -> str:
        return f"watcher {self.name} of asset {self.asset_id}"


class TriggerFiring(models.Model):
    """One event of a watcher's trigger, registered (the idempotency key of asset watchers,
    docs/triggerer.md "Exactly once"): the trigger's ``sequence``-th event since it was
    created. A triggerer that fires it again (two triggerers running the trigger at once,
    one thought dead) meets the unique key and registers nothing. Kept after the trigger is
    deleted (trigger ids are never reused)."""

    trigger_id = models.BigIntegerField()
    sequence = models.PositiveIntegerField()
    #: SHA-256 of the payload as stored in the events' extra (for the record)
    payload_hash = models.CharField(max_length=64)
    #: the asset events it became
    event_ids = models.JSONField(default=list, blank=True)
    registered_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "trigger_firing"
        constraints = [
            models.UniqueConstraint(
                fields=["trigger_id", "sequence"], name="trigger_firing_trigger_sequence_unique"
            )
        ]

    def __str__(self) -> str:
        return f"event {self.sequence} of trigger {self.trigger_id}"
