"""Task logs on the way in: the chunks a try's worker ships (``POST
/execution/task-instances/{id}/logs``, docs/api-execution.md), masked, capped and stored
(``assets_app.models.logs``; read with ``assets_app.selectors.logs``).

The stored log of a try is its chunks' text in ``seq`` order. What it holds:

- every secret the server keeps is masked (``***``) before it is stored
  (``selectors.secrets.secrets_masker``: what Airflow's task SDK masks once a task has read
  it). A chunk is masked whole: a secret split across two chunks is not (the worker cuts
  chunks at line ends, so only a line longer than a chunk can split one);
- at most ``TASK_LOG_MAX_BYTES`` of it (UTF-8, after masking), cut at the last line end that
  fits, then :data:`TRUNCATION_MARKER` on a line of its own; later chunks are counted, not
  kept.

Offsets make an append idempotent: a chunk says where it starts among the bytes the worker
sent (``offset``); one that was received already (a retry after a lost answer) is
acknowledged and not stored again, one that starts past the end is refused
(``TaskLogOffsetError``, with ``expected_offset``).

Locking: an append locks the try's ``TaskLog`` row (``SELECT … FOR UPDATE`` on PostgreSQL;
SQLite's ``BEGIN IMMEDIATE`` serializes writers) before it reads the counters, so concurrent
appends to one try are applied one after the other, each exactly once.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.db.models.functions import Right
from django.utils import timezone

from assets_app.exceptions import ConflictError, TaskLogOffsetError
from assets_app.masking import TextMasker
from assets_app.models import TaskLog, TaskLogChunk
from assets_app.selectors.logs import TaskTryRef, task_log_of, task_try_by_id
from assets_app.selectors.secrets import secrets_masker

logger = logging.getLogger(__name__)

#: The line that ends a log cut at ``TASK_LOG_MAX_BYTES``.
TRUNCATION_MARKER = (
    "*** Log truncated: this try's log reached TASK_LOG_MAX_BYTES ({limit} bytes); "
    "the rest of its output was not kept ***\n"
)


@dataclass(frozen=True)
class TaskLogPosition:
    """Where a try's log stands: the offset its next chunk must start at (bytes received),
    the bytes kept, whether it was cut at the cap, and whether its worker sent its end."""

    next_offset: int
    stored_bytes: int
    truncated: bool
    closed: bool

    @classmethod
    def of(cls, log: TaskLog | None) -> TaskLogPosition:
        if log is None:
            return cls(next_offset=0, stored_bytes=0, truncated=False, closed=False)
        return cls(
            next_offset=log.received_bytes,
            stored_bytes=log.stored_bytes,
            truncated=log.truncated,
            closed=log.closed,
        )


def task_log_position(*, task_instance_id: uuid.UUID) -> TaskLogPosition:
    """Where the log of the try ``task_instance_id`` stands (all zero before its first
    chunk); ``TaskInstanceNotFoundError`` when there is no such try."""
    task_try_by_id(task_instance_id=task_instance_id)
    return TaskLogPosition.of(task_log_of(task_instance_id=task_instance_id))


def task_log_append(
    *, task_instance_id: uuid.UUID, offset: int, content: str, final: bool = False
) -> TaskLogPosition:
    """Append ``content``, which starts at byte ``offset`` of what the try's worker sent, to
    the try's log (see the module docstring); ``final``: the worker has sent everything.

    Raises ``TaskInstanceNotFoundError`` (no such try, current or earlier) and
    ``TaskLogOffsetError`` (a gap before ``offset``). One transaction.
    """
    ref = task_try_by_id(task_instance_id=task_instance_id)
    masker = secrets_masker()  # reads and decrypts outside the lock
    with transaction.atomic():
        log = _locked_log(ref)
        received = log.received_bytes
        if offset > received:
            raise TaskLogOffsetError(
                f"The chunk starts at byte {offset} but {received} bytes of this try's log "
                "were received: a chunk before it is missing",
                expected_offset=received,
            )
        raw = content.encode("utf-8")
        fields = ["updated_at"]
        if offset + len(raw) > received:
            fields += ["received_bytes", "closed"]
            log.received_bytes = offset + len(raw)
            log.closed = final
            if not log.truncated:
                # from the first byte not received before (a retry may overlap)
                _store(log, raw[received - offset :].decode("utf-8", "replace"), masker)
                fields += ["stored_bytes", "chunk_count", "truncated"]
        elif final and not log.closed:
            log.closed = True
            fields.append("closed")
        log.updated_at = timezone.now()
        log.save(update_fields=fields)
    return TaskLogPosition.of(log)


def _locked_log(ref: TaskTryRef) -> TaskLog:
    """The try's ``TaskLog``, created at its first chunk, locked until the transaction ends."""
    locked = TaskLog.objects.select_for_update()
    log = locked.filter(task_instance_id=ref.task_instance_id).first()
    if log is None:
        TaskLog.objects.bulk_create([TaskLog(**ref.key_fields())], ignore_conflicts=True)
        log = locked.filter(task_instance_id=ref.task_instance_id).first()
    if log is None:  # the try's key holds the log of another id: cannot be, refused
        raise ConflictError(
            f"Try {ref.try_number} of {ref.dag_id}.{ref.task_id} @ {ref.run_id} has a log "
            "under another task instance id"
        )
    return log


def _store(log: TaskLog, text: str, masker: TextMasker) -> None:
    """Mask ``text`` and store what fits under the cap as the log's next chunk; at the cap,
    the marker line too. Updates the log's counters (not saved)."""
    if not text:
        return
    masked = masker.mask(text)
    data = masked.encode("utf-8")
    limit: int = settings.TASK_LOG_MAX_BYTES
    room = max(limit - log.stored_bytes, 0)
    if len(data) > room:
        kept = _cut(data, room)
        if kept and not kept.endswith("\n"):
            kept += "\n"
        elif not kept and not _ends_a_line(log):
            kept = "\n"
        masked = kept + TRUNCATION_MARKER.format(limit=limit)
        log.truncated = True
        label, try_number = log.task_label, log.try_number
        transaction.on_commit(
            lambda: logger.info(
                "the log of %s try %s is truncated at %s bytes", label, try_number, limit
            )
        )
    log.chunk_count += 1
    TaskLogChunk.objects.create(log=log, seq=log.chunk_count, content=masked)
    log.stored_bytes += len(masked.encode("utf-8"))


def _cut(data: bytes, room: int) -> str:
    """The longest start of ``data`` within ``room`` bytes that ends a line, else (one long
    line) that ends a character."""
    head = data[:room]
    line_end = head.rfind(b"\n")
    if line_end >= 0:
        head = head[: line_end + 1]
    return head.decode("utf-8", "ignore")


def _ends_a_line(log: TaskLog) -> bool:
    """Whether the log stored so far is empty or ends with a line end."""
    if log.chunk_count == 0:
        return True
    last = (
        TaskLogChunk.objects.filter(log=log, seq=log.chunk_count)
        .annotate(last=Right("content", 1))
        .values_list("last", flat=True)
        .first()
    )
    return last in (None, "", "\n")
