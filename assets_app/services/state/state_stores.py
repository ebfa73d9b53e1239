"""The task and asset state stores (Airflow 3.3's AIP-103 ``task_state_store`` and
``asset_state_store``, its ``MetastoreBackend``): what ``context["task_state_store"]`` and
``context["asset_state_store"]`` read and write through the execution API.

- A **task's store** is addressed by a task instance id but kept per (run, task, map index):
  every try of the task instance (each has its own id) sees the same keys, so a retry finds
  the job id its first try stored. Clearing the task instance keeps them (as Airflow); they
  go with their DAG run (a foreign key with ``CASCADE``), or when they expire
  (:func:`task_states_expired_delete`, ``manage.py state_store_clean``).
- An **asset's store** is addressed by the active asset's name or uri and outlives runs;
  the rows go with the asset and when it stops being active (:func:`asset_states_forget`,
  called where assets are deactivated, as Airflow's scheduler removes them).

Values are any JSON value but ``null``, kept as their JSON text (Airflow's ``Text`` column,
so an object's keys come back in the order they were sent). Keys are 1 to 512 characters.
Each write is one statement (a race-safe upsert or a ``DELETE``) in its own transaction; no
lock is taken. Log lines name the key, never the value.
"""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from assets_app.exceptions import (
    AssetNotFoundError,
    StateStoreKeyNotFoundError,
    TaskInstanceNotFoundError,
)
from assets_app.models import AssetActive, AssetStateStore, TaskInstance, TaskStateStore

logger = logging.getLogger(__name__)

#: ``last_updated_by_kind`` of a value a task wrote (Airflow's ``AssetStateStoreWriterKind``).
WRITER_TASK = "task"


def state_value_encode(value: Any) -> str:
    """The stored text of a value (compact JSON)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def state_value_decode(text: str) -> Any:
    """The value of a stored text."""
    return json.loads(text)


# --- task state store ----------------------------------------------------------------------


@dataclass(frozen=True)
class TaskStateScope:
    """Whose store a task instance id names: its run, task and map index (not its try)."""

    dag_run_id: int
    dag_id: str
    run_id: str
    task_id: str
    map_index: int

    def rows(self) -> QuerySet[TaskStateStore]:
        """This store's rows (a queryset)."""
        return TaskStateStore.objects.filter(
            dag_run_id=self.dag_run_id, task_id=self.task_id, map_index=self.map_index
        )


def task_state_scope(*, task_instance_id: uuid.UUID | str) -> TaskStateScope:
    """The store of the task instance ``task_instance_id`` (its current try's id), else
    ``TaskInstanceNotFoundError``."""
    row = (
        TaskInstance.objects.filter(pk=task_instance_id)
        .values_list("dag_run_id", "dag_id", "run_id", "task_id", "map_index")
        .first()
    )
    if row is None:
        raise TaskInstanceNotFoundError(f"Task instance {task_instance_id} not found")
    return TaskStateScope(*row)


def _key_not_found(store: str, key: str) -> StateStoreKeyNotFoundError:
    return StateStoreKeyNotFoundError(f"{store} state store key {key!r} not found")


def task_state_get(*, task_instance_id: uuid.UUID | str, key: str) -> Any:
    """The value stored under ``key`` in the task instance's store; else
    ``TaskInstanceNotFoundError`` or ``StateStoreKeyNotFoundError``."""
    scope = task_state_scope(task_instance_id=task_instance_id)
    text = scope.rows().filter(key=key).values_list("value", flat=True).first()
    if text is None:
        raise _key_not_found("Task", key)
    return state_value_decode(text)


def task_state_set(
    *,
    task_instance_id: uuid.UUID | str,
    key: str,
    value: Any,
    expires_at: datetime | None = None,
) -> None:
    """Store ``value`` under ``key`` in the task instance's store, creating or replacing it
    (``expires_at`` too: ``None`` never expires)."""
    scope = task_state_scope(task_instance_id=task_instance_id)
    row = TaskStateStore(
        dag_run_id=scope.dag_run_id,
        dag_id=scope.dag_id,
        run_id=scope.run_id,
        task_id=scope.task_id,
        map_index=scope.map_index,
        key=key,
        value=state_value_encode(value),
        updated_at=timezone.now(),
        expires_at=expires_at,
    )
    with transaction.atomic():
        TaskStateStore.objects.bulk_create(
            [row],
            update_conflicts=True,
            unique_fields=["dag_run", "task_id", "map_index", "key"],
            update_fields=["value", "updated_at", "expires_at"],
        )
        transaction.on_commit(lambda: logger.debug("task state %r set for %s", key, scope))


def task_state_delete(*, task_instance_id: uuid.UUID | str, key: str) -> int:
    """Delete ``key`` from the task instance's store; how many rows went (0 or 1)."""
    scope = task_state_scope(task_instance_id=task_instance_id)
    with transaction.atomic():
        deleted, _ = scope.rows().filter(key=key).delete()
    return deleted


def task_state_clear(*, task_instance_id: uuid.UUID | str) -> int:
    """Delete every key of the task instance's store (its map index only, as Airflow's
    ``clear`` from a task); how many rows went."""
    scope = task_state_scope(task_instance_id=task_instance_id)
    with transaction.atomic():
        deleted, _ = scope.rows().delete()
    return deleted


def task_states_expired(*, now: datetime | None = None) -> QuerySet[TaskStateStore]:
    """The task state rows whose ``expires_at`` has passed (a queryset)."""
    return TaskStateStore.objects.filter(expires_at__lt=now or timezone.now())


def task_states_expired_delete(*, now: datetime | None = None) -> int:
    """Delete the task state rows whose ``expires_at`` has passed (Airflow's ``airflow
    state-store clean``); how many went. Asset state never expires."""
    with transaction.atomic():
        deleted, _ = task_states_expired(now=now).delete()
    logger.info("deleted %s expired task state store rows", deleted)
    return deleted


# --- asset state store ---------------------------------------------------------------------


def asset_state_asset_id(*, name: str | None = None, uri: str | None = None) -> int:
    """The id of the active asset with this name (else this uri); else
    ``AssetNotFoundError`` (Airflow's 404 for an unknown asset)."""
    lookup = {"name": name} if name is not None else {"uri": uri}
    asset_id = AssetActive.objects.filter(**lookup).values_list("asset_id", flat=True).first()
    if asset_id is None:
        field, wanted = next(iter(lookup.items()))
        raise AssetNotFoundError(f"Asset with {field}={wanted!r} not found")
    return asset_id


def asset_state_get(*, key: str, name: str | None = None, uri: str | None = None) -> Any:
    """The value stored under ``key`` for the active asset with this name (or uri)."""
    asset_id = asset_state_asset_id(name=name, uri=uri)
    text = (
        AssetStateStore.objects.filter(asset_id=asset_id, key=key)
        .values_list("value", flat=True)
        .first()
    )
    if text is None:
        raise _key_not_found("Asset", key)
    return state_value_decode(text)


def asset_state_set(
    *,
    key: str,
    value: Any,
    writer_task_instance_id: uuid.UUID | str,
    name: str | None = None,
    uri: str | None = None,
) -> None:
    """Store ``value`` under ``key`` for the active asset, creating or replacing it, and
    record the task instance that wrote it (``TaskInstanceNotFoundError`` when it is gone)."""
    asset_id = asset_state_asset_id(name=name, uri=uri)
    writer = task_state_scope(task_instance_id=writer_task_instance_id)
    row = AssetStateStore(
        asset_id=asset_id,
        key=key,
        value=state_value_encode(value),
        updated_at=timezone.now(),
        last_updated_by_kind=WRITER_TASK,
        last_updated_by_dag_id=writer.dag_id,
        last_updated_by_run_id=writer.run_id,
        last_updated_by_task_id=writer.task_id,
        last_updated_by_map_index=writer.map_index,
    )
    with transaction.atomic():
        AssetStateStore.objects.bulk_create(
            [row],
            update_conflicts=True,
            unique_fields=["asset", "key"],
            update_fields=[
                "value",
                "updated_at",
                "last_updated_by_kind",
                "last_updated_by_dag_id",
                "last_updated_by_run_id",
                "last_updated_by_task_id",
                "last_updated_by_map_index",
            ],
        )
        transaction.on_commit(
            lambda: logger.debug("asset state %r set for asset %s by %s", key, asset_id, writer)
        )


def asset_state_delete(*, key: str, name: str | None = None, uri: str | None = None) -> int:
    """Delete ``key`` of the active asset's store; how many rows went (0 or 1)."""
    asset_id = asset_state_asset_id(name=name, uri=uri)
    with transaction.atomic():
        deleted, _ = AssetStateStore.objects.filter(asset_id=asset_id, key=key).delete()
    return deleted


def asset_state_clear(*, name: str | None = None, uri: str | None = None) -> int:
    """Delete every key of the active asset's store; how many rows went."""
    asset_id = asset_state_asset_id(name=name, uri=uri)
    with transaction.atomic():
        deleted, _ = AssetStateStore.objects.filter(asset_id=asset_id).delete()
    return deleted


def asset_states_forget(*, asset_ids: set[int]) -> int:
    """Delete the stores of assets that were just deactivated (Airflow's scheduler removes
    the state of assets no longer active in any DAG). Runs in the caller's transaction."""
    if not asset_ids:
        return 0
    deleted, _ = AssetStateStore.objects.filter(asset_id__in=asset_ids).delete()
    return deleted
