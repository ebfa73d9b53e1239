"""Reads of task logs (``assets_app.models.logs``): which try a log belongs to, where it stands,
and its text, streamed a few chunks at a time so that no reader holds a whole log.

:func:`task_log_complete` is the one rule of "nothing more will come" that the admin's live
panel and ``/api/v2``'s ``continuation_token`` share.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from assets_app.exceptions import TaskInstanceNotFoundError
from assets_app.models import (
    TaskInstance,
    TaskInstanceHistory,
    TaskInstanceState,
    TaskLog,
    TaskLogChunk,
)

#: Chunks read per query while streaming a log: at most this many chunks (each at most
#: ``TASK_LOG_CHUNK_MAX_BYTES`` and the truncation marker) are in memory at once.
CHUNKS_PER_QUERY = 8

#: A try in these states may still write to its log (Airflow's ``end_of_log`` rule).
ACTIVE_STATES = frozenset({TaskInstanceState.RUNNING, TaskInstanceState.DEFERRED})

_TRY_FIELDS = ("dag_run_id", "dag_id", "run_id", "task_id", "map_index", "try_number")


@dataclass(frozen=True)
class TaskTryRef:
    """One try of a task: the current one (``TaskInstance``) or an earlier one
    (``TaskInstanceHistory``), by what addresses it and where it stands."""

    task_instance_id: uuid.UUID
    dag_run_id: int
    dag_id: str
    run_id: str
    task_id: str
    map_index: int
    try_number: int
    state: str | None
    hostname: str
    end_date: datetime | None
    is_current: bool

    def key_fields(self) -> dict[str, Any]:
        """The fields a ``TaskLog`` of this try copies."""
        return {
            "task_instance_id": self.task_instance_id,
            "dag_run_id": self.dag_run_id,
            "dag_id": self.dag_id,
            "run_id": self.run_id,
            "task_id": self.task_id,
            "map_index": self.map_index,
            "try_number": self.try_number,
        }


_REF_FIELDS = (*_TRY_FIELDS, "state", "hostname", "end_date")


def _ref(row: dict[str, Any], *, task_instance_id: uuid.UUID, is_current: bool) -> TaskTryRef:
    return TaskTryRef(task_instance_id=task_instance_id, is_current=is_current, **row)


def task_try_by_id(*, task_instance_id: uuid.UUID) -> TaskTryRef:
    """The try whose id is ``task_instance_id``, current or earlier; else
    ``TaskInstanceNotFoundError``."""
    row = TaskInstance.objects.filter(pk=task_instance_id).values(*_REF_FIELDS).first()
    if row is not None:
        return _ref(row, task_instance_id=task_instance_id, is_current=True)
    row = (
        TaskInstanceHistory.objects.filter(task_instance_id=task_instance_id)
        .values(*_REF_FIELDS)
        .first()
    )
    if row is not None:
        return _ref(row, task_instance_id=task_instance_id, is_current=False)
    raise TaskInstanceNotFoundError(f"Task Instance not found: {task_instance_id}")


def task_try_by_key(
    *, dag_id: str, run_id: str, task_id: str, map_index: int, try_number: int
) -> TaskTryRef | None:
    """Try ``try_number`` of the task: the task instance if that is its try, else the earlier
    try in its history (Airflow's lookup for a log); ``None`` when there is no such try."""
    key = {"dag_id": dag_id, "run_id": run_id, "task_id": task_id, "map_index": map_index}
    current = (
        TaskInstance.objects.filter(**key, try_number=try_number).values("pk", *_REF_FIELDS).first()
    )
    if current is not None:
        return _ref(current, task_instance_id=current.pop("pk"), is_current=True)
    earlier = (
        TaskInstanceHistory.objects.filter(**key, try_number=try_number)
        .values("task_instance_id", *_REF_FIELDS)
        .first()
    )
    if earlier is None:
        return None
    return _ref(earlier, task_instance_id=earlier.pop("task_instance_id"), is_current=False)


def task_tries(ti: TaskInstance) -> list[TaskTryRef]:
    """Every try of ``ti``'s task, the earliest first: its history, then itself."""
    key = {"dag_id": ti.dag_id, "run_id": ti.run_id, "task_id": ti.task_id}
    earlier = (
        TaskInstanceHistory.objects.filter(**key, map_index=ti.map_index)
        .exclude(try_number=ti.try_number)
        .order_by("try_number")
        .values("task_instance_id", *_REF_FIELDS)
    )
    tries = [
        _ref(row, task_instance_id=row.pop("task_instance_id"), is_current=False) for row in earlier
    ]
    current = {field: getattr(ti, field) for field in _REF_FIELDS}
    return [*tries, _ref(current, task_instance_id=ti.pk, is_current=True)]


def task_log_of(*, task_instance_id: uuid.UUID) -> TaskLog | None:
    """The log of the try whose id is ``task_instance_id`` (``None``: nothing shipped yet)."""
    return TaskLog.objects.filter(task_instance_id=task_instance_id).first()


def task_logs_of(task_instance_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, TaskLog]:
    """The logs of these tries, by try id (one query)."""
    logs = TaskLog.objects.filter(task_instance_id__in=list(task_instance_ids))
    return {log.task_instance_id: log for log in logs}


def task_log_complete(ref: TaskTryRef, log: TaskLog | None, *, now: datetime | None = None) -> bool:
    """Whether nothing more will come of the try's log: the try is not running (Airflow's
    ``end_of_log``: not the task instance's try, or not ``running`` / ``deferred``) and its
    worker has shipped the end of it, or could have (``TASK_LOG_FLUSH_TIMEOUT`` seconds and one
    shipping interval have passed since its last chunk, or since the try ended)."""
    if ref.is_current and ref.state in ACTIVE_STATES:
        return False
    if log is not None and log.closed:
        return True
    seen = [when for when in (ref.end_date, log.updated_at if log else None) if when is not None]
    if not seen:
        return True
    settle = timedelta(seconds=settings.TASK_LOG_FLUSH_TIMEOUT + settings.TASK_LOG_SHIP_INTERVAL)
    return (now or timezone.now()) - max(seen) > settle


def task_log_chunks(
    *, log_id: int, after: int = 0, upto: int | None = None
) -> Iterator[tuple[int, str]]:
    """``(seq, text)`` of the log's chunks after ``after`` and up to ``upto`` (all), in order,
    :data:`CHUNKS_PER_QUERY` per query."""
    while True:
        rows = TaskLogChunk.objects.filter(log_id=log_id, seq__gt=after).order_by("seq")
        if upto is not None:
            rows = rows.filter(seq__lte=upto)
        batch = list(rows.values_list("seq", "content")[:CHUNKS_PER_QUERY])
        yield from batch
        if len(batch) < CHUNKS_PER_QUERY:
            return
        after = batch[-1][0]


def log_lines(texts: Iterable[str]) -> Iterator[str]:
    """The lines of the concatenated ``texts``, without their line ends (a last line without
    one included): a chunk may end inside a line."""
    partial: list[str] = []
    for text in texts:
        pieces = text.split("\n")
        if len(pieces) == 1:
            partial.append(text)
            continue
        partial.append(pieces[0])
        yield "".join(partial)
        yield from pieces[1:-1]
        partial = [pieces[-1]]
    if any(partial):
        yield "".join(partial)


def log_message(line: str) -> dict[str, Any]:
    """One line as Airflow's ``StructuredLogMessage``: a JSON object with an ``event`` text and
    no ``timestamp`` or an ISO 8601 one (what Airflow's task SDK writes) as it is, any other
    line as ``{"event": line}`` (Airflow's reading of a line it cannot parse)."""
    if line.startswith("{"):
        try:
            parsed = json.loads(line, parse_constant=_no_constant)
        except (ValueError, RecursionError):
            parsed = None
        if (
            isinstance(parsed, dict)
            and isinstance(parsed.get("event"), str)
            and ("timestamp" not in parsed or _is_timestamp(parsed["timestamp"]))
        ):
            return parsed
    return {"event": line}


def _is_timestamp(value: Any) -> bool:
    try:
        return isinstance(value, str) and parse_datetime(value) is not None
    except ValueError:
        return False


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # NaN, Infinity: the line stays text
