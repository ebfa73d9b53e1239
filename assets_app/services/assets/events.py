"""Operator use cases on asset events: a manual event, pruning old events (docs/commands.md)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from functools import partial
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from assets_app.exceptions import AssetAmbiguousError, AssetNotFoundError, InvalidInputError
from assets_app.models import (
    PARTITION_KEY_LENGTH,
    Asset,
    AssetEvent,
)
from assets_app.services.assets.consumption import events_awaiting_consumers

# The consumer-queueing and notification steps are shared with task-success registration so
# that a manual event triggers exactly what a task's event would.
from assets_app.services.assets.registration import (
    EmittedEvent,
    asset_changes_notify,
    asset_event_consumers_queue,
)
from assets_app.services.audit import Actor, event_log_record
from assets_app.validators import json_value_problem

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
    actor: Actor | None = None,
) -> AssetEvent:
    """Record an operator's event on an existing asset (source fields empty) and queue its
    consumer DAGs, as Airflow's "create asset event" does, with ``actor``'s
    ``create_asset_event`` in the event log. Signals are sent after commit."""
    if extra is not None and not isinstance(extra, dict):
        raise InvalidInputError("extra must be a JSON object")
    problem = json_value_problem(extra, max_bytes=settings.ASSET_EVENT_EXTRA_MAX_BYTES)
    if problem is not None:
        raise InvalidInputError(problem.describe("extra"))
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
    event_log_record(
        actor,
        "create_asset_event",
        extra={
            "asset_id": asset.pk,
            "name": asset.name,
            "uri": asset.uri,
            "event_id": event.pk,
            "extra": event.extra,
            "partition_key": partition_key,
        },
    )
    emitted = [EmittedEvent(event=event)]
    queued = asset_event_consumers_queue(events=emitted, now=now)
    transaction.on_commit(partial(asset_changes_notify, events=emitted), robust=True)
    logger.info("manual asset event %s on %s, %d DAG(s) queued", event.pk, asset, len(queued))
    return event


@dataclass(frozen=True)
class PruneProgress:
    """Where a prune stands: ``examined`` of ``total`` old events, of which ``deleted`` were
    deleted (with ``dry_run``: would be) and ``kept_unconsumed`` kept as still awaited."""

    total: int
    examined: int = 0
    deleted: int = 0
    kept_unconsumed: int = 0
    dry_run: bool = False


def asset_events_prune(
    *,
    older_than: datetime,
    dry_run: bool = False,
    batch_size: int = 1000,
    include_unconsumed: bool = False,
    progress: Callable[[PruneProgress], None] | None = None,
) -> PruneProgress:
    """Delete events with ``timestamp < older_than`` (and their alias/run links) in batches,
    keeping every event a consumer still waits for unless ``include_unconsumed``.

    An event is *waiting* when the next asset-triggered run of a DAG that has
    ``asset_dag_run_queue`` rows would consume it
    (:func:`assets_app.services.assets.consumption.events_awaiting_consumers` states the
    rule). It is re-evaluated for every batch, so a run the scheduler creates meanwhile frees
    the events it consumed, and a DAG queued meanwhile protects its events from the next batch
    on.

    The old events are walked oldest first by ``(timestamp, id)`` (the timestamp index), one
    transaction per batch, so a long prune never holds locks for long; ``dry_run`` walks them
    the same way and deletes nothing. With ``progress``, the old events are counted first and
    ``progress`` is called with the running totals before the first batch and after each.
    Returns the totals.
    """
    if batch_size <= 0:
        raise InvalidInputError("batch size must be positive")
    old = AssetEvent.objects.filter(timestamp__lt=older_than)
    state = PruneProgress(total=old.count() if progress else 0, dry_run=dry_run)
    if progress:
        progress(state)
    position: tuple[datetime, int] | None = None
    while True:
        with transaction.atomic():
            batch = old
            if position is not None:
                # (timestamp, id) > position, with a leading range the timestamp index
                # serves (an OR alone would rescan the walked part of the index every batch)
                after_ts, after_pk = position
                batch = batch.filter(timestamp__gte=after_ts).filter(
                    Q(timestamp__gt=after_ts) | Q(pk__gt=after_pk)
                )
            rows = list(
                batch.order_by("timestamp", "pk").values_list("timestamp", "pk")[:batch_size]
            )
            if not rows:
                break
            position = rows[-1]
            ids = [pk for _, pk in rows]
            kept: set[int] = set()
            if not include_unconsumed:
                kept = set(
                    AssetEvent.objects.filter(events_awaiting_consumers(), pk__in=ids).values_list(
                        "pk", flat=True
                    )
                )
            doomed = [pk for pk in ids if pk not in kept]
            deleted = len(doomed)
            if doomed and not dry_run:
                # the deletion collector removes the alias and DAG-run links (CASCADE) with one
                # DELETE each; only the ids are loaded (no extra JSON per event)
                _, per_model = AssetEvent.objects.filter(pk__in=doomed).only("pk").delete()
                deleted = per_model.get(AssetEvent._meta.label, 0)
        state = replace(
            state,
            examined=state.examined + len(ids),
            deleted=state.deleted + deleted,
            kept_unconsumed=state.kept_unconsumed + len(kept),
        )
        if progress:
            progress(state)
    logger.info(
        "%s %d asset event(s) older than %s, kept %d awaited by a consumer",
        "would prune" if dry_run else "pruned",
        state.deleted,
        older_than.isoformat(),
        state.kept_unconsumed,
    )
    return state
