"""The asset scheduler: turns ``asset_dag_run_queue`` rows into asset-triggered DAG runs.

One pass (:func:`scheduler_pass`) first decides, without locks and in a constant number of
queries, which unpaused, non-stale DAGs have queue rows that meet their condition (like
Airflow's ``dags_needing_dagruns``). Each of those is then handled by
:func:`dag_asset_triggered_run_create` in its **own transaction**, which re-checks everything
under locks:

1. Lock the DAG row (``FOR NO KEY UPDATE SKIP LOCKED``): the per-DAG mutex. A DAG another
   scheduler is working on is skipped this pass. ``NO KEY`` so that producers' foreign-key
   checks on the DAG (``FOR KEY SHARE``) never wait for us. Paused or stale DAGs are left
   alone (their queue rows wait).
2. Lock the DAG's queue rows (``FOR UPDATE SKIP LOCKED``: a row a producer is still upserting
   stays for the next pass) and evaluate ``Dag.asset_expression``
   (:mod:`assets_app.conditions`) with "the asset has a locked queue row" as the leaf test.
   Not met → nothing changes; the rows wait.
3. Met → pick the events to consume **by id**: events on the assets the condition names
   directly or by ref, and events emitted *through* one of its aliases (as Airflow does: an
   alias consumer does not consume direct events on the alias's assets), not partitioned,
   that **no earlier run of this DAG consumed** (with no upper time bound: an event stamped by
   a producer whose clock runs ahead of ours is committed, and its queue row is deleted here,
   so it must be consumed now). So an event is never
   consumed twice by one DAG, and an event that committed after an earlier run's scan (its
   timestamp older than that run) is consumed by the next run instead of being skipped as a
   timestamp window would. The scan starts ``EVENT_LOOKBACK`` before the previous
   asset-triggered run was created; a DAG's first run has no lower bound (like Airflow, it
   consumes the history).
4. Create the ``DagRun`` (``asset_triggered``, state ``queued``, ``logical_date`` and data
   interval null, ``run_after`` = newest queue row's ``created_at``, run id
   ``asset_triggered__<run_after ISO>_<8 random chars>`` — as Airflow 3), its
   ``dagrun_asset_event`` rows, one ``scheduled`` task instance per declared task
   (``Dag.task_ids``; else the task ids of its inlet/outlet references; ``max_tries`` = the
   task's ``retries``) for a worker to claim, and delete the locked
   queue rows. If every event was already consumed (a queue row re-added by a producer whose
   event the previous run took), the rows are deleted and no run is created: never two runs
   for one set of events.

Why no event is left behind without locking producers out: producers queue consumers with an
upsert (``INSERT … ON CONFLICT (asset_id, target_dag_id) DO UPDATE``, see
:func:`assets_app.services.registration.asset_event_consumers_queue`) in the transaction that
inserts their events, which locks the queue row until they commit. So, for a queue row of
this DAG:

* a producer upserted it first (not committed yet): step 2 skips it and the row survives
  this transaction, so the producer's event is consumed by this run if it commits before
  step 3's scan, else by the next pass;
* we locked it first: the producer's upsert **waits** for us. Its event is not committed, so
  step 3 cannot see it and this run does not consume it. When we commit having deleted the
  row, the upsert finds no conflict any more and inserts a fresh row (with the producer's
  ``created_at``), which the next pass picks up; if we kept the row (condition not met) the
  upsert updates it;
* a producer that committed before step 2 is fully visible to step 3.

Events are consumed by id (step 3), so an event visible to two passes is consumed once. The
scheduler itself never waits for a producer (``SKIP LOCKED``, ``NO KEY``), so the two cannot
deadlock. With ``ON CONFLICT DO NOTHING`` instead, a producer meeting our locked row would
have done nothing without waiting, and its event would have had no queue row once we deleted
ours.

On SQLite ``select_for_update`` is a no-op; the ``IMMEDIATE`` transactions
(settings) make each DAG's transaction exclusive, which gives the same guarantees.
"""

from __future__ import annotations

import enum
import logging
import secrets
import string
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import DatabaseError, transaction
from django.db.models import Exists, Max, OuterRef, Q
from django.utils import timezone

from assets_app.conditions import (
    Condition,
    ConditionReferences,
    Resolution,
    condition_is_met,
    condition_parse,
    condition_references,
)
from assets_app.exceptions import InvalidAssetExpression
from assets_app.models import (
    Asset,
    AssetActive,
    AssetAliasAsset,
    AssetAliasAssetEvent,
    AssetDagRunQueue,
    AssetEvent,
    Dag,
    DagRun,
    DagRunAssetEvent,
    DagRunState,
    DagRunType,
    DagTask,
    TaskInletAssetReference,
    TaskInstance,
    TaskInstanceState,
    TaskOutletAssetReference,
)
from task_sdk.definitions import AssetUniqueKey

logger = logging.getLogger(__name__)

#: How far before the previous asset-triggered run the event scan starts. An event is missed
#: only if its producer's transaction stayed open longer than this (requests time out long
#: before).
EVENT_LOOKBACK = timedelta(minutes=10)

_RUN_ID_ALPHABET = string.ascii_letters + string.digits


class Outcome(enum.StrEnum):
    """What one DAG's transaction did."""

    CREATED = "created"  # a run was created
    NOT_READY = "not_ready"  # condition not met (or no queue rows left); rows wait
    LOCKED = "locked"  # another scheduler holds the DAG this pass
    INACTIVE = "inactive"  # paused or stale (or gone); rows wait
    NOTHING_TO_CONSUME = "nothing_to_consume"  # met, but every event was already consumed
    DROPPED = "dropped"  # the DAG is no longer asset-scheduled; its rows were deleted
    INVALID = "invalid"  # asset_expression unreadable; rows wait, error logged
    FAILED = "failed"  # database error; rolled back, retried next pass


@dataclass(frozen=True)
class AssetTriggeredRun:
    """A DAG run the scheduler created."""

    dag_id: str
    run_id: str
    dag_run_pk: int
    run_after: datetime
    event_ids: tuple[int, ...]
    task_ids: tuple[str, ...]


@dataclass(frozen=True)
class DagOutcome:
    dag_id: str
    outcome: Outcome
    run: AssetTriggeredRun | None = None


@dataclass
class SchedulerPassResult:
    """Everything one pass did, DAG by DAG."""

    outcomes: list[DagOutcome] = field(default_factory=list)

    @property
    def created(self) -> list[AssetTriggeredRun]:
        return [o.run for o in self.outcomes if o.run is not None]

    def count(self, outcome: Outcome) -> int:
        return sum(1 for o in self.outcomes if o.outcome is outcome)


def asset_triggered_run_id(*, run_after: datetime) -> str:
    """``asset_triggered__<run_after ISO>_<8 random letters/digits>``, like Airflow 3."""
    suffix = "".join(secrets.choice(_RUN_ID_ALPHABET) for _ in range(8))
    return f"{DagRunType.ASSET_TRIGGERED}__{run_after.isoformat()}_{suffix}"


def scheduler_pass(*, max_dags: int | None = None) -> SchedulerPassResult:
    """One scheduling pass over every unpaused, non-stale DAG that has queue rows.

    First, without locks and in a constant number of queries, find the DAGs whose condition is
    met by their queue rows (as Airflow's ``dags_needing_dagruns`` does); then handle each of
    them, oldest-waiting first, in its own transaction (:func:`dag_asset_triggered_run_create`,
    which re-checks everything under locks). A database error in one DAG is logged and the pass
    goes on; that DAG is retried next pass.
    """
    result = SchedulerPassResult()
    ready = _ready_dag_ids(result=result)
    if max_dags is not None:
        ready = ready[:max_dags]
    for dag_id in ready:
        try:
            outcome = dag_asset_triggered_run_create(dag_id=dag_id)
        except DatabaseError:
            logger.exception("scheduling DAG %s failed; retrying next pass", dag_id)
            outcome = DagOutcome(dag_id=dag_id, outcome=Outcome.FAILED)
        result.outcomes.append(outcome)
    return result


def _ready_dag_ids(*, result: SchedulerPassResult) -> list[str]:
    """DAGs worth a transaction this pass, oldest-waiting first (3-5 queries, no locks).

    DAGs whose condition is not met (or unreadable) are recorded in ``result`` and left out.
    """
    queued: dict[str, set[int]] = {}
    first_queued: dict[str, datetime] = {}
    for dag_id, asset_id, created_at in AssetDagRunQueue.objects.filter(
        target_dag__is_paused=False, target_dag__is_stale=False
    ).values_list("target_dag_id", "asset_id", "created_at"):
        queued.setdefault(dag_id, set()).add(asset_id)
        if dag_id not in first_queued or created_at < first_queued[dag_id]:
            first_queued[dag_id] = created_at
    if not queued:
        return []
    conditions: dict[str, Condition] = {}
    ready: list[str] = []
    for dag_id, expression in Dag.objects.filter(dag_id__in=queued).values_list(
        "dag_id", "asset_expression"
    ):
        if expression is None:
            ready.append(dag_id)  # its rows are dropped under lock
            continue
        try:
            conditions[dag_id] = condition_parse(expression)
        except InvalidAssetExpression as exc:
            logger.error("DAG %s has an invalid asset_expression: %s", dag_id, exc)
            result.outcomes.append(DagOutcome(dag_id=dag_id, outcome=Outcome.INVALID))
    resolution = _condition_resolve(condition_references(*conditions.values()))
    for dag_id, condition in conditions.items():
        if condition_is_met(condition, resolution=resolution, ready_asset_ids=queued[dag_id]):
            ready.append(dag_id)
        else:
            result.outcomes.append(DagOutcome(dag_id=dag_id, outcome=Outcome.NOT_READY))
    return sorted(ready, key=lambda dag_id: (first_queued[dag_id], dag_id))


def dag_asset_triggered_run_create(*, dag_id: str) -> DagOutcome:
    """Create one asset-triggered run of ``dag_id`` if its condition is met (one transaction).

    Takes its own locks (the DAG row, then its queue rows, both without waiting); the caller
    must hold none and must not be inside a transaction.
    """
    with transaction.atomic(durable=True):
        dag = (
            Dag.objects.select_for_update(skip_locked=True, no_key=True)
            .filter(dag_id=dag_id)
            .only("dag_id", "is_paused", "is_stale", "asset_expression", "task_ids")
            .first()
        )
        if dag is None:
            return DagOutcome(dag_id=dag_id, outcome=Outcome.LOCKED)
        if dag.is_paused or dag.is_stale:
            return DagOutcome(dag_id=dag_id, outcome=Outcome.INACTIVE)
        queued = list(
            AssetDagRunQueue.objects.select_for_update(skip_locked=True)
            .filter(target_dag_id=dag_id)
            .values_list("pk", "asset_id", "created_at")
        )
        if not queued:
            return DagOutcome(dag_id=dag_id, outcome=Outcome.NOT_READY)
        queue_pks = [pk for pk, _, _ in queued]
        if dag.asset_expression is None:
            # No longer asset-scheduled (re-declared with another schedule): as Airflow does,
            # its queue rows are dropped.
            AssetDagRunQueue.objects.filter(pk__in=queue_pks).delete()
            return DagOutcome(dag_id=dag_id, outcome=Outcome.DROPPED)
        try:
            condition = condition_parse(dag.asset_expression)
        except InvalidAssetExpression as exc:
            logger.error("DAG %s has an invalid asset_expression: %s", dag_id, exc)
            return DagOutcome(dag_id=dag_id, outcome=Outcome.INVALID)
        references = condition_references(condition)
        resolution = _condition_resolve(references)
        if not condition_is_met(
            condition, resolution=resolution, ready_asset_ids={a for _, a, _ in queued}
        ):
            return DagOutcome(dag_id=dag_id, outcome=Outcome.NOT_READY)

        now = timezone.now()
        event_ids = _unconsumed_event_ids(
            dag_id=dag_id, alias_names=references.alias_names, resolution=resolution
        )
        if not event_ids:
            AssetDagRunQueue.objects.filter(pk__in=queue_pks).delete()
            return DagOutcome(dag_id=dag_id, outcome=Outcome.NOTHING_TO_CONSUME)

        run_after = max(created_at for _, _, created_at in queued)
        run = DagRun.objects.create(
            dag_id=dag_id,
            run_id=asset_triggered_run_id(run_after=run_after),
            logical_date=None,
            data_interval_start=None,
            data_interval_end=None,
            run_after=run_after,
            run_type=DagRunType.ASSET_TRIGGERED,
            state=DagRunState.QUEUED,
            conf={},
            created_at=now,
        )
        DagRunAssetEvent.objects.bulk_create(
            [DagRunAssetEvent(dag_run=run, event_id=event_id) for event_id in event_ids]
        )
        task_ids = _dag_task_ids(dag)
        retries = dict(
            DagTask.objects.filter(dag_id=dag_id, task_id__in=task_ids).values_list(
                "task_id", "retries"
            )
        )
        TaskInstance.objects.bulk_create(
            [
                TaskInstance(
                    dag_run=run,
                    dag_id=dag_id,
                    run_id=run.run_id,
                    task_id=task_id,
                    map_index=-1,
                    try_number=1,
                    max_tries=retries.get(task_id, 0),
                    state=TaskInstanceState.SCHEDULED,
                )
                for task_id in task_ids
            ]
        )
        AssetDagRunQueue.objects.filter(pk__in=queue_pks).delete()
        created = AssetTriggeredRun(
            dag_id=dag_id,
            run_id=run.run_id,
            dag_run_pk=run.pk,
            run_after=run_after,
            event_ids=tuple(event_ids),
            task_ids=tuple(task_ids),
        )
        transaction.on_commit(
            lambda: logger.info(
                "created asset-triggered run %s of %s consuming %d event(s)",
                created.run_id,
                dag_id,
                len(created.event_ids),
            )
        )
        return DagOutcome(dag_id=dag_id, outcome=Outcome.CREATED, run=created)


def _condition_resolve(references: ConditionReferences) -> Resolution:
    """Look up the asset ids of a condition's assets, aliases and refs (≤ 3 queries)."""
    asset_ids: dict[AssetUniqueKey, int] = {}
    if references.asset_keys:
        keys = Q()
        for key in references.asset_keys:
            keys |= Q(name=key.name, uri=key.uri)
        asset_ids = {
            AssetUniqueKey(name=name, uri=uri): pk
            for pk, name, uri in Asset.objects.filter(keys).values_list("pk", "name", "uri")
        }
    alias_asset_ids: dict[str, set[int]] = {}
    if references.alias_names:
        for name, asset_id in AssetAliasAsset.objects.filter(
            alias__name__in=references.alias_names
        ).values_list("alias__name", "asset_id"):
            alias_asset_ids.setdefault(name, set()).add(asset_id)
    name_ref_ids: dict[str, int] = {}
    uri_ref_ids: dict[str, int] = {}
    if references.name_refs or references.uri_refs:
        for asset_id, name, uri in AssetActive.objects.filter(
            Q(name__in=references.name_refs) | Q(uri__in=references.uri_refs)
        ).values_list("asset_id", "name", "uri"):
            if name in references.name_refs:
                name_ref_ids[name] = asset_id
            if uri in references.uri_refs:
                uri_ref_ids[uri] = asset_id
    return Resolution(
        asset_ids=asset_ids,
        alias_asset_ids=alias_asset_ids,
        name_ref_ids=name_ref_ids,
        uri_ref_ids=uri_ref_ids,
    )


def _unconsumed_event_ids(
    *, dag_id: str, alias_names: Collection[str], resolution: Resolution
) -> list[int]:
    """Ids of the events the new run consumes, oldest first (one query, plus one for the bound).

    Events on assets the condition names directly or by ref, and events emitted through one of
    its aliases (``alias_names``); not partitioned; not consumed by an earlier run of this DAG.
    """
    if not resolution.all_asset_ids():
        return []
    previous = DagRun.objects.filter(dag_id=dag_id, run_type=DagRunType.ASSET_TRIGGERED).aggregate(
        latest=Max("created_at")
    )["latest"]
    wanted = _next_run_events(
        dag_id=dag_id, alias_names=alias_names, resolution=resolution, previous_run_at=previous
    )
    events = AssetEvent.objects.filter(wanted)
    return list(events.order_by("timestamp", "pk").values_list("pk", flat=True))


def _next_run_events(
    *,
    dag_id: str,
    alias_names: Collection[str],
    resolution: Resolution,
    previous_run_at: datetime | None,
) -> Q:
    """The events the next asset-triggered run of ``dag_id`` consumes, as a filter on events.

    The one definition of what a run consumes (step 3 of the module docstring), used to create
    runs and to find the events still waiting for a consumer (:func:`events_awaiting_consumers`).
    ``previous_run_at``: when the DAG's latest asset-triggered run was created, if any.
    """
    resolved_ids = resolution.all_asset_ids()
    if not resolved_ids:
        return Q(pk__in=[])
    wanted = Q(asset_id__in=resolution.direct_asset_ids())
    if any(resolution.alias_asset_ids.values()):
        wanted |= Q(
            Exists(
                AssetAliasAssetEvent.objects.filter(
                    event_id=OuterRef("pk"), alias__name__in=alias_names
                )
            )
        )
    events = (
        wanted & Q(asset_id__in=resolved_ids, partition_key__isnull=True) & ~_consumed_by(dag_id)
    )
    if previous_run_at is not None:
        events &= Q(timestamp__gt=previous_run_at - EVENT_LOOKBACK)
    return events


def events_awaiting_consumers() -> Q:
    """A filter on events: those the next run of some **queued** DAG would consume.

    A DAG is queued when it has ``asset_dag_run_queue`` rows, paused and stale DAGs included
    (their rows wait for them). The events its next asset-triggered run consumes are exactly
    those of :func:`_next_run_events`: on an asset its schedule names directly or by ref, or
    emitted through one of its aliases; without a partition key; consumed by no run of that
    DAG yet; and, once the DAG has had an asset-triggered run, stamped later than
    ``EVENT_LOOKBACK`` before the latest one was created (older events are never consumed).
    A DAG that is no longer asset-scheduled waits for nothing (the scheduler drops its rows);
    one whose stored expression cannot be read keeps every event on its queued assets that no
    run of it consumed. Evaluated now: 1 query without queued DAGs, else 3-6.
    """
    queued_assets: dict[str, set[int]] = {}
    for dag_id, asset_id in AssetDagRunQueue.objects.order_by().values_list(
        "target_dag_id", "asset_id"
    ):
        queued_assets.setdefault(dag_id, set()).add(asset_id)
    if not queued_assets:
        return Q(pk__in=[])
    conditions: dict[str, Condition] = {}
    unreadable: list[str] = []
    for dag_id, expression in Dag.objects.filter(
        dag_id__in=queued_assets, asset_expression__isnull=False
    ).values_list("dag_id", "asset_expression"):
        try:
            conditions[dag_id] = condition_parse(expression)
        except InvalidAssetExpression:
            unreadable.append(dag_id)
    resolution = _condition_resolve(condition_references(*conditions.values()))
    previous_runs = dict(
        DagRun.objects.filter(dag_id__in=conditions, run_type=DagRunType.ASSET_TRIGGERED)
        .values("dag_id")
        .annotate(latest=Max("created_at"))
        .values_list("dag_id", "latest")
    )
    awaited = Q(pk__in=[])
    for dag_id, condition in sorted(conditions.items()):
        references = condition_references(condition)
        awaited |= _next_run_events(
            dag_id=dag_id,
            alias_names=references.alias_names,
            resolution=_resolution_restrict(resolution, references),
            previous_run_at=previous_runs.get(dag_id),
        )
    for dag_id in sorted(unreadable):
        awaited |= Q(asset_id__in=queued_assets[dag_id]) & ~_consumed_by(dag_id)
    return awaited


def _consumed_by(dag_id: str) -> Q:
    """Events some run of ``dag_id`` consumed."""
    return Q(
        Exists(DagRunAssetEvent.objects.filter(event_id=OuterRef("pk"), dag_run__dag_id=dag_id))
    )


def _resolution_restrict(resolution: Resolution, references: ConditionReferences) -> Resolution:
    """The part of a resolution shared by many DAGs that one DAG's condition refers to."""
    return Resolution(
        asset_ids={k: v for k, v in resolution.asset_ids.items() if k in references.asset_keys},
        alias_asset_ids={
            k: v for k, v in resolution.alias_asset_ids.items() if k in references.alias_names
        },
        name_ref_ids={
            k: v for k, v in resolution.name_ref_ids.items() if k in references.name_refs
        },
        uri_ref_ids={k: v for k, v in resolution.uri_ref_ids.items() if k in references.uri_refs},
    )


def _dag_task_ids(dag: Dag) -> list[str]:
    """The DAG's declared tasks; without a declared list, the tasks its asset references name."""
    if dag.task_ids:
        return list(dict.fromkeys(str(task_id) for task_id in dag.task_ids))
    found = set(
        TaskOutletAssetReference.objects.filter(dag_id=dag.dag_id).values_list("task_id", flat=True)
    )
    found |= set(
        TaskInletAssetReference.objects.filter(dag_id=dag.dag_id).values_list("task_id", flat=True)
    )
    return sorted(found)
