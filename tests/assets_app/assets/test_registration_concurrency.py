"""Concurrent registrations on PostgreSQL (docs/concepts.md, "Guarantees").

Each thread has its own database connection and transaction, locks its own task instance as
the execution API does, and registers alias events whose targets do not exist yet.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection, transaction

from assets_app.models import (
    Asset,
    AssetAlias,
    AssetAliasAsset,
    AssetAliasAssetEvent,
    AssetDagRunQueue,
    AssetEvent,
    DagScheduleAssetNameReference,
    DagScheduleAssetReference,
    TaskInstance,
    TaskInstanceState,
)
from assets_app.outlets import AliasOutletEvent, OutletProfile, OutletType
from assets_app.services.assets.registration import RegistrationResult, asset_changes_register
from task_sdk.definitions import AssetUniqueKey
from tests.factories import DagFactory, TaskInstanceFactory

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

THREADS = 32


def register_locked(
    ti_id: Any, alias_names: list[str], targets: list[tuple[str, str]]
) -> RegistrationResult:
    """What the execution API does: lock the TI row, register, commit."""
    with transaction.atomic():
        ti = TaskInstance.objects.select_for_update().get(pk=ti_id)
        return asset_changes_register(
            task_instance=ti,
            task_outlets=[OutletProfile(type=OutletType.ALIAS, name=n) for n in alias_names],
            outlet_events=[
                AliasOutletEvent(
                    source_alias_name=alias,
                    dest_asset_key=AssetUniqueKey(name=name, uri=uri),
                    extra={"ti": str(ti_id)},
                    dest_asset_extra={"created_by": str(ti_id)},
                )
                for alias in alias_names
                for name, uri in targets
            ],
        )


def run_in_threads(work: list[Callable[[], Any]]) -> list[Any]:
    """Run each callable in its own thread, released together by a barrier."""
    barrier = threading.Barrier(len(work))
    results: list[Any] = [None] * len(work)

    def run(index: int) -> None:
        try:
            barrier.wait(timeout=30)
            results[index] = work[index]()
        except BaseException as exc:  # reported by the test, not lost in the thread
            results[index] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(work))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return results


def running_tis(count: int) -> list[TaskInstance]:
    return [
        TaskInstanceFactory(state=TaskInstanceState.RUNNING, task_id=f"t{n}") for n in range(count)
    ]


def test_simultaneous_alias_events_to_the_same_new_asset_and_alias():
    # given: 32 running task instances; neither the asset nor the alias exists; a consumer
    tis = running_tis(THREADS)
    target = ("s3://bucket/my-task", "s3://bucket/my-task")

    # when: all register at once
    results = run_in_threads(
        [lambda ti_id=ti.pk: register_locked(ti_id, ["example-alias"], [target]) for ti in tis]
    )

    # then: every request succeeded, one asset/alias/link, no event lost
    errors = [r for r in results if not isinstance(r, RegistrationResult)]
    assert errors == []
    assert all(len(r.events) == 1 for r in results)
    asset = Asset.objects.get()
    assert (asset.name, asset.uri) == target
    assert asset.extra["created_by"] in {str(ti.pk) for ti in tis}
    alias = AssetAlias.objects.get()
    assert alias.name == "example-alias"
    assert list(AssetAliasAsset.objects.values_list("alias_id", "asset_id")) == [
        (alias.pk, asset.pk)
    ]
    assert AssetEvent.objects.filter(asset=asset).count() == THREADS
    assert sorted(AssetEvent.objects.values_list("extra__ti", flat=True)) == sorted(
        str(ti.pk) for ti in tis
    )
    assert AssetAliasAssetEvent.objects.filter(alias=alias).count() == THREADS


def test_overlapping_targets_in_any_order_neither_deadlock_nor_duplicate():
    # given: every request emits through 3 shared aliases to 20 shared new assets, each
    # listing them in its own random order, and queues one shared consumer
    tis = running_tis(THREADS)
    aliases = ["al_a", "al_b", "al_c"]
    targets = [(f"asset_{n:02d}", f"s3://shared/{n:02d}") for n in range(20)]
    consumer = DagFactory(dag_id="consumer")
    rng = random.Random(7)

    def work(ti_id: Any) -> Callable[[], RegistrationResult]:
        my_aliases = rng.sample(aliases, k=len(aliases))
        my_targets = rng.sample(targets, k=len(targets))
        return lambda: register_locked(ti_id, my_aliases, my_targets)

    # the consumer schedules on asset_05 directly: create that one asset up front; another
    # on asset_07 by name, which the first request to get there creates (its queue row a plain
    # insert, the others' an upsert)
    asset_05 = Asset.objects.create(name="asset_05", uri="s3://shared/05")
    DagScheduleAssetReference.objects.create(asset=asset_05, dag=consumer)
    DagScheduleAssetNameReference.objects.create(name="asset_07", dag=DagFactory(dag_id="by_name"))

    # when
    results = run_in_threads([work(ti.pk) for ti in tis])

    # then
    assert [r for r in results if not isinstance(r, RegistrationResult)] == []
    assert Asset.objects.count() == len(targets)
    assert AssetAlias.objects.count() == len(aliases)
    assert AssetAliasAsset.objects.count() == len(aliases) * len(targets)
    # one event per (request, asset), linked to the three aliases
    assert AssetEvent.objects.count() == THREADS * len(targets)
    assert AssetAliasAssetEvent.objects.count() == THREADS * len(targets) * len(aliases)
    asset_07 = Asset.objects.get(name="asset_07")
    assert sorted(AssetDagRunQueue.objects.values_list("asset_id", "target_dag_id")) == sorted(
        [(asset_05.pk, "consumer"), (asset_07.pk, "by_name")]
    )


class HeldTransaction:
    """Registers in a thread and keeps the transaction open until told to commit or roll back."""

    class RollbackRequestedError(Exception):
        pass

    def __init__(self, ti_id: Any, alias: str, target: tuple[str, str]) -> None:
        self.registered = threading.Event()
        self.finish = threading.Event()
        self.commit = True
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(ti_id, alias, target))

    def _run(self, ti_id: Any, alias: str, target: tuple[str, str]) -> None:
        try:
            with transaction.atomic():
                ti = TaskInstance.objects.select_for_update().get(pk=ti_id)
                asset_changes_register(
                    task_instance=ti,
                    task_outlets=[OutletProfile(type=OutletType.ALIAS, name=alias)],
                    outlet_events=[
                        AliasOutletEvent(
                            source_alias_name=alias,
                            dest_asset_key=AssetUniqueKey(name=target[0], uri=target[1]),
                            dest_asset_extra={"by": "first"},
                        )
                    ],
                )
                self.registered.set()
                self.finish.wait(timeout=30)
                if not self.commit:
                    raise self.RollbackRequestedError
        except self.RollbackRequestedError:
            pass
        except BaseException as exc:
            self.error = exc
        finally:
            self.registered.set()
            connection.close()


@pytest.mark.parametrize("first_commits", [True, False], ids=["commit", "rollback"])
def test_insert_waits_for_an_uncommitted_conflicting_insert(first_commits, await_lock_wait):
    """READ COMMITTED: our INSERT … ON CONFLICT DO NOTHING blocks on the other transaction's
    uncommitted row; when that commits we insert nothing and the re-SELECT (a new snapshot)
    finds its row; when it rolls back our INSERT goes through. Either way no event is lost."""
    # given: a first request has created the asset and alias but not committed yet
    first_ti, second_ti = running_tis(2)
    target = ("dyn", "s3://bucket/dyn")
    DagScheduleAssetNameReference.objects.create(name="dyn", dag=DagFactory(dag_id="by_name"))
    first = HeldTransaction(first_ti.pk, "al", target)
    first.thread.start()
    assert first.registered.wait(timeout=30)
    assert first.error is None

    # when: a second request registers the same target and alias
    second_done = threading.Event()
    second: list[Any] = []

    def register_second() -> None:
        try:
            second.append(register_locked(second_ti.pk, ["al"], [target]))
        except BaseException as exc:
            second.append(exc)
        finally:
            second_done.set()
            connection.close()

    second_thread = threading.Thread(target=register_second)
    second_thread.start()

    # then: it waits on the first transaction's uncommitted rows (blocked on a lock in
    # PostgreSQL, not just slow) ...
    assert await_lock_wait(query_like="%INSERT INTO %") == 1
    assert not second_done.wait(timeout=1.0)
    # ... until that one ends
    first.commit = first_commits
    first.finish.set()
    first.thread.join(timeout=30)
    assert second_done.wait(timeout=30)
    second_thread.join(timeout=30)
    assert first.error is None
    assert isinstance(second[0], RegistrationResult), second[0]

    asset = Asset.objects.get()
    assert asset.extra == ({"by": "first"} if first_commits else {"created_by": str(second_ti.pk)})
    assert AssetAlias.objects.count() == 1
    assert AssetAliasAsset.objects.count() == 1
    assert AssetEvent.objects.count() == (2 if first_commits else 1)
    assert AssetAliasAssetEvent.objects.count() == (2 if first_commits else 1)
    assert AssetEvent.objects.filter(source_task_id=second_ti.task_id).count() == 1
    # one queue row for the consumer by name: inserted by whichever request created the asset,
    # upserted by the other
    assert list(AssetDagRunQueue.objects.values_list("asset_id", "target_dag_id")) == [
        (asset.pk, "by_name")
    ]
