"""Assets, aliases and asset events (Airflow's ``asset``, ``asset_alias``, ``asset_event``
and their link tables)."""

from __future__ import annotations

from django.db import models
from django.db.models.functions import Upper
from django.utils import timezone

from .common import ID_LENGTH, NAME_LENGTH, PARTITION_KEY_LENGTH, composite_key


class Asset(models.Model):
    """A piece of data a task produces or consumes, identified by (name, uri)."""

    name = models.CharField(max_length=NAME_LENGTH)
    uri = models.CharField(max_length=NAME_LENGTH)
    group = models.CharField(max_length=NAME_LENGTH, default="", blank=True)
    extra = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "asset"
        ordering = ["name", "uri"]
        constraints = [
            models.UniqueConstraint(fields=["name", "uri"], name="asset_name_uri_unique"),
        ]

    def __str__(self) -> str:
        if self.name == self.uri:
            return self.name
        return f"{self.name} ({self.uri})"


class AssetActive(models.Model):
    """Marks an asset as active: some declared, non-stale DAG produces or consumes it.

    Among active assets a name and a uri each identify exactly one asset.
    """

    asset = models.OneToOneField(
        Asset, on_delete=models.CASCADE, primary_key=True, related_name="active"
    )
    name = models.CharField(max_length=NAME_LENGTH)
    uri = models.CharField(max_length=NAME_LENGTH)

    class Meta:
        db_table = "asset_active"
        verbose_name_plural = "active assets"
        constraints = [
            models.UniqueConstraint(fields=["name"], name="asset_active_name_unique"),
            models.UniqueConstraint(fields=["uri"], name="asset_active_uri_unique"),
        ]

    def __str__(self) -> str:
        return f"active {self.name}"


class AssetAlias(models.Model):
    """A name through which a task emits events for assets chosen at run time."""

    name = models.CharField(max_length=NAME_LENGTH)
    group = models.CharField(max_length=NAME_LENGTH, default="", blank=True)
    assets = models.ManyToManyField(Asset, through="AssetAliasAsset", related_name="aliases")

    class Meta:
        db_table = "asset_alias"
        ordering = ["name"]
        verbose_name_plural = "asset aliases"
        constraints = [models.UniqueConstraint(fields=["name"], name="asset_alias_name_unique")]

    def __str__(self) -> str:
        return self.name


class AssetAliasAsset(models.Model):
    """An alias resolved to an asset (created when a task emits through the alias)."""

    alias = models.ForeignKey(
        AssetAlias,
        on_delete=models.CASCADE,
        related_name="asset_links",
        db_index=False,  # by alias: asset_alias_asset_unique's prefix
    )
    asset = models.ForeignKey(Asset, on_delete=models.CASCADE, related_name="alias_links")

    class Meta:
        db_table = "asset_alias_asset"
        verbose_name = "alias → asset mapping"
        constraints = composite_key("alias", "asset", name="asset_alias_asset_unique")

    def __str__(self) -> str:
        return f"{self.alias_id} → {self.asset_id}"


class AssetEvent(models.Model):
    """One recorded change to an asset. Append-only; survives deletion of its asset.

    ``asset`` has no database constraint (as in Airflow): deleting an asset keeps its events,
    whose ``asset_id`` then points nowhere and ``event.asset`` reads as ``None``.
    """

    asset = models.ForeignKey(
        Asset,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        null=True,  # only so that joins are LEFT JOINs once the asset is gone
        related_name="events",
        db_index=False,  # by asset: idx_asset_id_timestamp's prefix
    )
    extra = models.JSONField(default=dict, blank=True)
    source_task_id = models.CharField(max_length=ID_LENGTH, null=True, blank=True)  # noqa: DJ001
    source_dag_id = models.CharField(max_length=ID_LENGTH, null=True, blank=True)  # noqa: DJ001
    source_run_id = models.CharField(max_length=ID_LENGTH, null=True, blank=True)  # noqa: DJ001
    source_map_index = models.IntegerField(default=-1)
    timestamp = models.DateTimeField(default=timezone.now)
    partition_key = models.CharField(  # noqa: DJ001
        max_length=PARTITION_KEY_LENGTH, null=True, blank=True
    )
    source_aliases = models.ManyToManyField(
        AssetAlias, through="AssetAliasAssetEvent", related_name="events"
    )

    class Meta:
        db_table = "asset_event"
        ordering = ["-timestamp", "-id"]
        indexes = [
            models.Index(fields=["asset", "timestamp"], name="idx_asset_id_timestamp"),
            models.Index(fields=["timestamp"], name="idx_asset_event_timestamp"),
            models.Index(fields=["source_dag_id"], name="idx_asset_event_source_dag"),
            # the admin's case-insensitive search by exact source DAG id / run id
            models.Index(Upper("source_dag_id"), name="idx_asset_event_source_dag_up"),
            models.Index(Upper("source_run_id"), name="idx_asset_event_source_run_up"),
        ]

    def __str__(self) -> str:
        return f"event {self.pk} on asset {self.asset_id}"


class AssetAliasAssetEvent(models.Model):
    """Links an event to an alias it was emitted through (the event's ``source_aliases``)."""

    alias = models.ForeignKey(
        AssetAlias,
        on_delete=models.CASCADE,
        related_name="event_links",
        db_index=False,  # by alias: asset_alias_asset_event_unique's prefix
    )
    # No database constraint: the link is inserted in the statement that inserts its event,
    # and events are only deleted through the ORM (``asset_events_prune``), whose collector
    # deletes the links first. The constraint guarded nothing and cost a check per link at
    # commit (a thousand alias events: a thousand ``SELECT … FOR KEY SHARE``).
    event = models.ForeignKey(
        AssetEvent, on_delete=models.CASCADE, related_name="alias_links", db_constraint=False
    )

    class Meta:
        db_table = "asset_alias_asset_event"
        verbose_name = "alias → event mapping"
        constraints = composite_key("alias", "event", name="asset_alias_asset_event_unique")

    def __str__(self) -> str:
        return f"{self.alias_id} → event {self.event_id}"
