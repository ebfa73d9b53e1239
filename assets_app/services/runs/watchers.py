"""Asset watchers (AIP-82; Airflow's ``AssetWatcherModel``, ``add_asset_trigger_references``
and ``Trigger.submit_event`` for assets; docs/triggerer.md "Asset watchers").

A DAG file declares ``Asset(..., watchers=[AssetWatcher(name, trigger)])``; the loader stores
each watcher on the DAG's row (``Dag.asset_watchers``: the asset's name and uri, the watcher's
name, the trigger's classpath and serialized kwargs). From there:

- **which run** (:func:`asset_watchers_sync`, after each load and pause change, and every
  triggerer pass): a watcher runs while its asset is scheduled on by at least one DAG that is
  neither paused nor stale (Airflow's ``_find_active_assets``). Each running one is an
  ``asset_watcher`` row tying the asset to a ``trigger`` row; the same trigger (classpath and
  kwargs text) is kept across loads, and shared by the assets that declare it (an event goes
  to each, as in Airflow). A watcher no longer wanted loses its row, and its trigger is
  deleted when no other asset watches with it: the triggerer running it cancels it. Triggers
  are claimed and moved between triggerers like a deferral's
  (``services.runs.triggers``);
- **an event** (:func:`watcher_event_submit`): each ``TriggerEvent`` becomes one asset event
  per asset watching with the trigger, ``extra = {"from_trigger": True, "payload": ...}``
  as Airflow's, through the registry's asset-event service (its consumers are queued). Exactly
  once: the triggerer numbers a trigger's events from the count already registered when it
  starts running it (:func:`watcher_sequences`), and a ``trigger_firing`` row with the unique
  key (trigger, number) is inserted in the transaction that registers the events; the same
  numbered event fired again (two triggerers running the trigger at once, one thought dead)
  meets the key and registers nothing.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Count, Max
from django.utils import timezone

from assets_app.exceptions import InvalidInputError
from assets_app.models import (
    Asset,
    AssetEvent,
    AssetWatcher,
    Dag,
    DagScheduleAssetReference,
    Trigger,
    TriggerFiring,
)
from assets_app.notify import TRIGGERS_CHANNEL, notify
from assets_app.services.runs.triggers import health_cutoff

logger = logging.getLogger(__name__)

#: (asset id, trigger classpath, trigger kwargs text)
WatcherKey = tuple[int, str, str]


def _wanted() -> dict[WatcherKey, str]:
    """The watchers that should run now, with their names: those declared on an asset an
    unpaused, non-stale DAG schedules on. Three queries."""
    declared: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for watchers in (
        Dag.objects.filter(is_stale=False)
        .exclude(asset_watchers=[])
        .values_list("asset_watchers", flat=True)
    ):
        for watcher in watchers or []:
            asset = watcher["asset"]
            declared.setdefault((asset["name"], asset["uri"]), []).append(watcher)
    if not declared:
        return {}
    ids = {
        (name, uri): pk
        for pk, name, uri in Asset.objects.filter(
            name__in={name for name, _ in declared}, uri__in={uri for _, uri in declared}
        ).values_list("pk", "name", "uri")
        if (name, uri) in declared
    }
    scheduled = set(
        DagScheduleAssetReference.objects.filter(
            asset_id__in=ids.values(), dag__is_paused=False, dag__is_stale=False
        ).values_list("asset_id", flat=True)
    )
    wanted: dict[WatcherKey, str] = {}
    for key, watchers in sorted(declared.items()):
        asset_id = ids.get(key)
        if asset_id is None or asset_id not in scheduled:
            continue
        for watcher in watchers:
            wanted.setdefault((asset_id, watcher["classpath"], watcher["kwargs"]), watcher["name"])
    return wanted


def _existing() -> dict[WatcherKey, tuple[int, int, str]]:
    """The watchers running now: key → (watcher id, trigger id, name). One query."""
    return {
        (asset_id, classpath, kwargs): (pk, trigger_id, name)
        for pk, asset_id, trigger_id, name, classpath, kwargs in AssetWatcher.objects.values_list(
            "pk", "asset_id", "trigger_id", "name", "trigger__classpath", "trigger__kwargs"
        )
    }


def _same(wanted: dict[WatcherKey, str], existing: dict[WatcherKey, tuple[int, int, str]]) -> bool:
    return wanted.keys() == existing.keys() and all(
        existing[key][2] == name for key, name in wanted.items()
    )


@dataclass(frozen=True)
class WatcherSync:
    created: int  # watchers that started (their triggers created or shared)
    removed: int  # watchers that stopped
    triggers_deleted: int


def asset_watchers_sync() -> WatcherSync:
    """Make the running watchers (``asset_watcher`` rows and their triggers) match the
    declared ones whose asset an unpaused DAG schedules on. A read-only check first (four
    queries); when something differs, one transaction that locks the assets concerned
    (``FOR NO KEY UPDATE``, in id order: two syncs at once take turns, the second sees the
    first's rows) and writes the difference. Triggerers are woken at the commit."""
    if _same(_wanted(), _existing()):
        return WatcherSync(0, 0, 0)
    with transaction.atomic():
        wanted = _wanted()
        existing = _existing()
        asset_ids = sorted({key[0] for key in [*wanted, *existing]})
        list(
            Asset.objects.select_for_update(no_key=True)
            .filter(pk__in=asset_ids)
            .order_by("pk")
            .values_list("pk", flat=True)
        )
        wanted, existing = _wanted(), _existing()  # as of the locks
        removed = [existing[key] for key in existing.keys() - wanted.keys()]
        renamed = [
            (existing[key][0], name)
            for key, name in wanted.items()
            if key in existing and existing[key][2] != name
        ]
        AssetWatcher.objects.filter(pk__in=[watcher_id for watcher_id, _, _ in removed]).delete()
        for watcher_id, name in renamed:
            AssetWatcher.objects.filter(pk=watcher_id).update(name=name)
        # a trigger no asset watches with any more is deleted (never a deferral's: watcher
        # triggers are only made here)
        orphans = (
            Trigger.objects.filter(pk__in={trigger_id for _, trigger_id, _ in removed})
            .annotate(watchers=Count("asset_watchers"))
            .filter(watchers=0)
        )
        deleted, _ = Trigger.objects.filter(
            pk__in=list(orphans.values_list("pk", flat=True))
        ).delete()
        shared = {
            (key[1], key[2]): running[1] for key, running in existing.items() if key in wanted
        }
        now = timezone.now()
        created = 0
        for key, name in sorted(wanted.items()):
            if key in existing:
                continue
            asset_id, classpath, kwargs = key
            trigger_id = shared.get((classpath, kwargs))
            if trigger_id is None:
                trigger_id = Trigger.objects.create(
                    classpath=classpath, kwargs=kwargs, created_date=now
                ).pk
                shared[(classpath, kwargs)] = trigger_id
            AssetWatcher.objects.create(
                asset_id=asset_id, trigger_id=trigger_id, name=name, created_date=now
            )
            created += 1
        if created:
            notify(TRIGGERS_CHANNEL)
    if created or removed:
        logger.info(
            "asset watchers: %d started, %d stopped (%d trigger(s) deleted)",
            created,
            len(removed),
            deleted,
        )
    return WatcherSync(created=created, removed=len(removed), triggers_deleted=deleted)


# --- the triggerer's side ---------------------------------------------------------------------


@dataclass(frozen=True)
class WatcherInfo:
    label: str  # ``asset 'name' watcher 'name'`` (each asset watching with the trigger)
    sequence: int  # the events of the trigger registered so far


def watcher_triggers(trigger_ids: Iterable[int]) -> dict[int, WatcherInfo]:
    """Which of ``trigger_ids`` are watchers' triggers, with the number of their events
    registered so far (a triggerer starting one numbers its events from there). Two
    queries."""
    labels: dict[int, list[str]] = {}
    for trigger_id, asset_name, name in AssetWatcher.objects.filter(
        trigger_id__in=list(trigger_ids)
    ).values_list("trigger_id", "asset__name", "name"):
        labels.setdefault(trigger_id, []).append(f"asset {asset_name!r} watcher {name!r}")
    sequences = dict(
        TriggerFiring.objects.filter(trigger_id__in=list(labels))
        .values("trigger_id")
        .annotate(last=Max("sequence"))
        .values_list("trigger_id", "last")
    )
    return {
        trigger_id: WatcherInfo(label=", ".join(names), sequence=sequences.get(trigger_id) or 0)
        for trigger_id, names in labels.items()
    }


def payload_hash(payload: Any) -> str:
    """SHA-256 of the payload's canonical JSON (recorded with the firing)."""
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def watcher_event_submit(*, trigger_id: int, sequence: int, payload: Any) -> list[AssetEvent]:
    """The ``sequence``-th event of a watcher's trigger (``payload`` in the SDK's serde form):
    one asset event per asset watching with it, ``extra = {"from_trigger": True, "payload":
    payload}``, registered as an operator's event is (``asset_event_create_manual``: its
    consumer DAGs are queued, the signals sent after the commit). One transaction, with the
    ``trigger_firing`` row (trigger, sequence): an event already registered, or whose trigger
    is gone (its watcher stopped), registers nothing. The events made (none then)."""
    from assets_app.services.assets.events import asset_event_create_manual

    digest = payload_hash(payload)
    with transaction.atomic():
        assets = list(
            Asset.objects.filter(watchers__trigger_id=trigger_id).order_by("pk").distinct()
        )
        if not assets:
            logger.info(
                "event %d of trigger %s: no asset watches with it now", sequence, trigger_id
            )
            return []
        try:
            with transaction.atomic():
                firing = TriggerFiring.objects.create(
                    trigger_id=trigger_id, sequence=sequence, payload_hash=digest
                )
        except IntegrityError:
            logger.warning(
                "event %d of trigger %s was already registered: not registered again",
                sequence,
                trigger_id,
            )
            return []
        events: list[AssetEvent] = []
        for asset in assets:
            extra = {"from_trigger": True, "payload": payload}
            try:
                event = asset_event_create_manual(name=asset.name, uri=asset.uri, extra=extra)
            except InvalidInputError as exc:
                logger.error(
                    "event %d of trigger %s: its payload cannot be an asset event's extra (%s); "
                    "registered without it",
                    sequence,
                    trigger_id,
                    exc,
                )
                extra = {"from_trigger": True, "payload": None, "payload_error": str(exc)}
                event = asset_event_create_manual(name=asset.name, uri=asset.uri, extra=extra)
            events.append(event)
        firing.event_ids = [event.pk for event in events]
        firing.save(update_fields=["event_ids"])
    logger.info(
        "event %d of trigger %s: asset event(s) %s",
        sequence,
        trigger_id,
        ", ".join(f"{event.pk} on {asset}" for event, asset in zip(events, assets, strict=True)),
    )
    return events


def with_watchers(works: list[Any]) -> list[Any]:
    """The triggerer's ``TriggerWork`` list with the watchers' triggers marked (``watcher``,
    their label, the ``sequence`` their events are numbered from)."""
    info = watcher_triggers(work.id for work in works)
    return [
        replace(work, watcher=True, label=info[work.id].label, sequence=info[work.id].sequence)
        if work.id in info
        else work
        for work in works
    ]


# --- what the admin shows -------------------------------------------------------------------


@dataclass(frozen=True)
class WatcherView:
    name: str
    classpath: str
    state: str  # e.g. "trigger 7, run by triggerer 2 (host pid 123)"


def asset_watchers_describe(*, asset: Asset) -> list[WatcherView]:
    """The asset's watchers as its admin page lists them: the running ones (their trigger and
    the triggerer running it, or why none does), then the ones DAG files declare that do not
    run (no unpaused DAG schedules on the asset)."""
    cutoff = health_cutoff(timezone.now())
    views: list[WatcherView] = []
    running: set[tuple[str, str]] = set()
    for watcher in AssetWatcher.objects.filter(asset=asset).select_related("trigger__triggerer"):
        trigger = watcher.trigger
        running.add((trigger.classpath, trigger.kwargs))
        triggerer = trigger.triggerer
        if triggerer is None:
            state = f"trigger {trigger.pk}, waiting for a triggerer to claim it"
        elif triggerer.ended_at is not None or triggerer.heartbeat < cutoff:
            state = f"trigger {trigger.pk}, held by {triggerer}, which is dead: moving"
        else:
            state = f"trigger {trigger.pk}, run by {triggerer}"
        views.append(WatcherView(watcher.name, trigger.classpath, state))
    declared: set[tuple[str, str, str]] = set()
    for watchers in (
        Dag.objects.filter(is_stale=False)
        .exclude(asset_watchers=[])
        .values_list("asset_watchers", flat=True)
    ):
        for one in watchers or []:
            if one["asset"] == {"name": asset.name, "uri": asset.uri}:
                key = (one["name"], one["classpath"], one["kwargs"])
                if (key[1], key[2]) not in running and key not in declared:
                    declared.add(key)
                    views.append(
                        WatcherView(
                            one["name"],
                            one["classpath"],
                            "not running: no unpaused DAG schedules on this asset",
                        )
                    )
    return views
