"""XCom writes and reads for the execution API (a task's return value and pushes)."""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction
from django.utils import timezone

from assets_app.exceptions import DagRunNotFoundError, MapLengthExceededError, XComNotFoundError
from assets_app.mapping import max_map_length
from assets_app.models import DagRun, TaskMap, XCom

logger = logging.getLogger(__name__)


def _dag_run(*, dag_id: str, run_id: str) -> DagRun:
    dag_run = DagRun.objects.filter(dag_id=dag_id, run_id=run_id).first()
    if dag_run is None:
        raise DagRunNotFoundError(dag_id=dag_id, run_id=run_id)
    return dag_run


def xcom_set(
    *,
    dag_id: str,
    run_id: str,
    task_id: str,
    key: str,
    value: Any,
    map_index: int = -1,
    mapped_length: int | None = None,
) -> None:
    """Store (insert or replace) one XCom value; race-safe upsert on its natural key. With
    ``mapped_length`` (the runner's word that the value maps a downstream), how many values
    it holds too (Airflow's ``task_map``, read when the downstream expands,
    ``runs.mapping``; ``MapLengthExceededError`` beyond ``MAX_MAP_LENGTH``, as Airflow refuses
    it, nothing stored)."""
    with transaction.atomic():
        dag_run = _dag_run(dag_id=dag_id, run_id=run_id)
        if mapped_length is not None:
            task_map_record(
                dag_run=dag_run, task_id=task_id, map_index=map_index, length=mapped_length
            )
        XCom.objects.bulk_create(
            [
                XCom(
                    dag_run=dag_run,
                    dag_id=dag_id,
                    run_id=run_id,
                    task_id=task_id,
                    map_index=map_index,
                    key=key,
                    value=value,
                    timestamp=timezone.now(),
                )
            ],
            update_conflicts=True,
            unique_fields=["dag_run", "task_id", "map_index", "key"],
            update_fields=["value", "timestamp"],
        )
    logger.debug("xcom %s set for %s.%s @ %s[%s]", key, dag_id, task_id, run_id, map_index)


def xcom_get(*, dag_id: str, run_id: str, task_id: str, key: str, map_index: int = -1) -> Any:
    """The stored value, or ``XComNotFoundError``."""
    xcom = (
        XCom.objects.filter(
            dag_id=dag_id, run_id=run_id, task_id=task_id, key=key, map_index=map_index
        )
        .only("value")
        .first()
    )
    if xcom is None:
        raise XComNotFoundError(dag_id=dag_id, run_id=run_id, task_id=task_id, key=key)
    return xcom.value


def xcom_count(*, dag_id: str, run_id: str, task_id: str, key: str) -> int:
    """How many map indexes pushed this key (``HEAD`` of the XCom route)."""
    return XCom.objects.filter(dag_id=dag_id, run_id=run_id, task_id=task_id, key=key).count()


def xcom_delete(*, dag_id: str, run_id: str, task_id: str, key: str, map_index: int = -1) -> int:
    """Delete one XCom value; returns the number of rows removed (0 or 1)."""
    deleted, _ = XCom.objects.filter(
        dag_id=dag_id, run_id=run_id, task_id=task_id, key=key, map_index=map_index
    ).delete()
    return deleted


def task_map_record(*, dag_run: DagRun, task_id: str, map_index: int, length: int) -> None:
    """Record how many values a task instance pushed for its mapped downstreams;
    ``MapLengthExceededError`` beyond ``MAX_MAP_LENGTH`` (the task fails: its downstream
    cannot map). Inside the caller's transaction."""
    if length > max_map_length():
        raise MapLengthExceededError(length=length, limit=max_map_length())
    TaskMap.objects.bulk_create(
        [TaskMap(dag_run=dag_run, task_id=task_id, map_index=map_index, length=length)],
        update_conflicts=True,
        unique_fields=["dag_run", "task_id", "map_index"],
        update_fields=["length"],
    )
