"""The log panel of a task instance's page: one try's log as the worker shipped it
(``assets_app.selectors.logs``), a link per try to switch, and while the try may still write,
a small script on the page that asks the admin's JSON endpoint for what came since, every
:data:`POLL_SECONDS` (no external script).

Routes, under the task instance's admin URL, for users with ``view_tasklog`` (besides viewing
task instances):

- ``<id>/log/<try>/?after=<seq>``: JSON ``{"try_number", "text", "next", "more", "complete",
  "truncated"}``: the text of the chunks after ``after``, at most about :data:`PAGE_CHARS`
  (``more``: ask again at once with ``after=next``);
- ``<id>/log/<try>/download/``: the whole log as a text file, streamed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from django.contrib import admin
from django.http import (
    HttpRequest,
    HttpResponse,
    HttpResponseBase,
    JsonResponse,
    StreamingHttpResponse,
)
from django.urls import URLPattern, path, reverse

from assets_app.models import TaskInstance, TaskLog
from assets_app.selectors.logs import (
    TaskTryRef,
    task_log_chunks,
    task_log_complete,
    task_log_of,
    task_logs_of,
    task_tries,
)

#: The permission a user needs to read task logs (besides ``view_taskinstance``).
LOG_PERMISSION = "assets_app.view_tasklog"
#: Characters of a log a page or one JSON answer carries at most (about: whole chunks).
PAGE_CHARS = 1024 * 1024
#: Seconds between two looks for more of a log that may still grow.
POLL_SECONDS = 2


@dataclass(frozen=True)
class LogSlice:
    """Text of a log's chunks after some chunk: up to chunk ``next``; ``more`` after it."""

    text: str
    next: int
    more: bool


def log_slice(log: TaskLog | None, *, after: int) -> LogSlice:
    """The chunks after ``after``, whole, until about :data:`PAGE_CHARS` characters."""
    if log is None:
        return LogSlice("", after, more=False)
    parts: list[str] = []
    size, last = 0, after
    for seq, text in task_log_chunks(log_id=log.pk, after=after, upto=log.chunk_count):
        parts.append(text)
        size += len(text)
        last = seq
        if size >= PAGE_CHARS:
            break
    return LogSlice("".join(parts), last, more=last < log.chunk_count)


@dataclass(frozen=True)
class TryLink:
    try_number: int
    state: str | None
    url: str
    selected: bool
    stored_bytes: int | None  # None: nothing shipped


def _json_error(status: int, message: str, **fields: Any) -> JsonResponse:
    return JsonResponse({"detail": message, **fields}, status=status)


class TaskLogAdminMixin(admin.ModelAdmin[TaskInstance]):
    """Adds the log panel and its two routes to the task instance admin."""

    def get_urls(self) -> list[URLPattern]:
        info = self.opts.app_label, self.opts.model_name
        return [
            path(
                "<path:object_id>/log/<int:try_number>/",
                self.admin_site.admin_view(self.log_json_view),
                name="{}_{}_log".format(*info),
            ),
            path(
                "<path:object_id>/log/<int:try_number>/download/",
                self.admin_site.admin_view(self.log_download_view),
                name="{}_{}_log_download".format(*info),
            ),
            *super().get_urls(),
        ]

    def may_read_logs(self, request: HttpRequest, obj: TaskInstance | None = None) -> bool:
        return self.has_view_permission(request, obj) and request.user.has_perm(LOG_PERMISSION)

    def log_panel(self, request: HttpRequest, obj: TaskInstance) -> dict[str, Any] | None:
        """What the page's log panel shows: the try asked for (``?log_try=``), else the
        current one, else (it has shipped nothing yet) the latest that has a log."""
        if not self.may_read_logs(request, obj):
            return None
        tries = task_tries(obj)
        logs = task_logs_of(t.task_instance_id for t in tries)
        asked = request.GET.get("log_try")
        by_number = {t.try_number: t for t in tries}
        notice = ""
        chosen = by_number.get(int(asked)) if asked and asked.isdigit() else None
        if asked is not None and chosen is None:
            notice = f"There is no try {asked} of this task instance; showing its latest try."
        if chosen is None:
            chosen = tries[-1]
            if chosen.task_instance_id not in logs and chosen.state not in ("running", "deferred"):
                chosen = next((t for t in reversed(tries) if t.task_instance_id in logs), chosen)
        log = logs.get(chosen.task_instance_id)
        first = log_slice(log, after=0)
        page = reverse(f"admin:{self.opts.app_label}_{self.opts.model_name}_change", args=[obj.pk])
        links = [
            TryLink(
                try_number=t.try_number,
                state=t.state,
                url=f"{page}?log_try={t.try_number}#ar-task-log",
                selected=t is chosen,
                stored_bytes=logs[t.task_instance_id].stored_bytes
                if t.task_instance_id in logs
                else None,
            )
            for t in tries
        ]
        return {
            "tries": links,
            "try_number": chosen.try_number,
            "log": log,
            "text": first.text,
            "next": first.next,
            "more": first.more,
            "complete": task_log_complete(chosen, log),
            "notice": notice,
            "poll_ms": POLL_SECONDS * 1000,
            "url": self._log_url(obj, chosen.try_number),
            "download_url": self._log_url(obj, chosen.try_number, download=True),
        }

    def _log_url(self, obj: TaskInstance, try_number: int, *, download: bool = False) -> str:
        name = f"admin:{self.opts.app_label}_{self.opts.model_name}_log"
        return reverse(name + ("_download" if download else ""), args=[obj.pk, try_number])

    def _try_of(
        self, request: HttpRequest, object_id: str, try_number: int
    ) -> TaskTryRef | JsonResponse:
        obj = self.get_object(request, object_id)
        if obj is None:
            return _json_error(404, f"No task instance {object_id!r}")
        if not self.may_read_logs(request, obj):
            return _json_error(403, f"Reading task logs needs the permission {LOG_PERMISSION}")
        found = next((t for t in task_tries(obj) if t.try_number == try_number), None)
        if found is None:
            return _json_error(
                404, f"{obj.task_label} has no try {try_number}", try_number=try_number
            )
        return found

    def log_json_view(self, request: HttpRequest, object_id: str, try_number: int) -> HttpResponse:
        if request.method != "GET":
            return _json_error(405, "Only GET is allowed")
        after_text = request.GET.get("after", "0")
        if not re.fullmatch(r"[0-9]{1,9}", after_text):
            return _json_error(
                400, "after must be a chunk number: a whole number from 0", field="after"
            )
        found = self._try_of(request, object_id, try_number)
        if isinstance(found, JsonResponse):
            return found
        log = task_log_of(task_instance_id=found.task_instance_id)
        piece = log_slice(log, after=int(after_text))
        return JsonResponse(
            {
                "try_number": try_number,
                "text": piece.text,
                "next": piece.next,
                "more": piece.more,
                "complete": task_log_complete(found, log),
                "truncated": bool(log and log.truncated),
            }
        )

    def log_download_view(
        self, request: HttpRequest, object_id: str, try_number: int
    ) -> HttpResponseBase:
        found = self._try_of(request, object_id, try_number)
        if isinstance(found, JsonResponse):
            return found
        log = task_log_of(task_instance_id=found.task_instance_id)
        texts = (
            text.encode("utf-8")
            for _, text in (
                task_log_chunks(log_id=log.pk, upto=log.chunk_count) if log is not None else ()
            )
        )
        response = StreamingHttpResponse(texts, content_type="text/plain; charset=utf-8")
        name = re.sub(r"[^A-Za-z0-9_.=-]+", "_", f"{found.dag_id}.{found.task_id}.{found.run_id}")
        response["Content-Disposition"] = f'attachment; filename="{name}.try{try_number}.log"'
        return response
