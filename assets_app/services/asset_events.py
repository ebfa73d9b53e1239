"""Operator use cases on asset events: a manual event, pruning old events (SPEC §6)."""

from __future__ import annotations

import logging
from datetime import datetime
from functools import partial
from typing import Any

from django.db import transaction
from django.utils import timezone

from assets_app.exceptions import AssetAmbiguousError, AssetNotFoundError, InvalidInputError
from assets_app.models import (
    PARTITION_KEY_LENGTH,
    Asset,
    AssetEvent,
)

# The consumer-queueing and notification steps are shared with task-success registration so
# that a manual event triggers exactly what a task's event would.
from assets_app.services.registration import (
    EmittedEvent,
    asset_changes_notify,
    asset_event_consumers_queue,
)

logger = logging.getLogger(__name__)


def asset_get_for_event(*, name: str | None, uri: str | None) -> Asset:
    """The asset a manual event is for.

    With name and uri: that asset. With one of them: the active asset with it, else the only
    asset with it. Raises ``AssetNotFoundError`` or ``AssetAmbiguousError``.
    """
    if not name and not uri:
        raise InvalidInputError("give the asset's name, uri or both")
    if name and uri:
        asset = Asset.objects.filter(name=name, uri=uri).first()
        if asset is None:
            raise AssetNotFoundError(f"no asset with name {name!r} and uri {uri!r}")
        return asset
    field, value = ("name", name) if name else ("uri", uri)
    active = Asset.objects.filter(**{f"active__{field}": value}).first()
    if active is not None:
        return active
    candidates = list(Asset.objects.filter(**{field: value}).order_by("pk")[:2])
    if not candidates:
        raise AssetNotFoundError(f"no asset with {field} {value!r}")
    if len(candidates) > 1:
        raise AssetAmbiguousError(
            f"several inactive assets have {field} {value!r}; give both name and uri"
        )
    return candidates[0]


@transaction.atomic
def asset_event_create_manual(
    *,
    name: str | None = None,
    uri: str | None = None,
    extra: dict[str, Any] | None = None,
    partition_key: str | None = None,
) -> AssetEvent:
    """Record an operator's event on an existing asset (source fields empty) and queue its
    consumer DAGs, as Airflow's "create asset event" does. Signals are sent after commit."""
    if extra is not None and not isinstance(extra, dict):
        raise InvalidInputError("extra must be a JSON object")
    if partition_key is not None and not 0 < len(partition_key) <= PARTITION_KEY_LENGTH:
        raise InvalidInputError(f"partition key must be 1-{PARTITION_KEY_LENGTH} characters")
    asset = asset_get_for_event(name=name, uri=uri)
    now = timezone.now()
    event = AssetEvent.objects.create(
        asset=asset,
        extra=extra or {},
        partition_key=partition_key,
        source_task_id=None,
        source_dag_id=None,
        source_run_id=None,
        timestamp=now,
    )
    emitted = [EmittedEvent(event=event)]
    queued = asset_event_consumers_queue(events=emitted, now=now)
    transaction.on_commit(partial(asset_changes_notify, events=emitted), robust=True)
    logger.info("manual asset event %s on %s, %d DAG(s) queued", event.pk, asset, len(queued))
    return event


def asset_events_prune(
    *, older_than: datetime, dry_run: bool = False, batch_size: int = 1000
) -> int:
    """Delete events with ``timestamp < older_than`` (and their alias/run links) in batches.

    Each batch is its own transaction, so a long prune never holds locks for long. Returns
    the number of events deleted (or, with ``dry_run``, that would be deleted).
    """
    if batch_size <= 0:
        raise InvalidInputError("batch size must be positive")
    old = AssetEvent.objects.filter(timestamp__lt=older_than)
    if dry_run:
        return old.count()
    deleted = 0
    while True:
        with transaction.atomic():
            ids = list(old.order_by("timestamp", "pk").values_list("pk", flat=True)[:batch_size])
            if not ids:
                break
            # the deletion collector removes the alias and DAG-run links (CASCADE) with one
            # DELETE each; only the ids are loaded (no extra JSON per event)
            _, per_model = AssetEvent.objects.filter(pk__in=ids).only("pk").delete()
            deleted += per_model.get(AssetEvent._meta.label, 0)
    logger.info("pruned %d asset event(s) older than %s", deleted, older_than.isoformat())
    return deleted
