"""``GET /api/v2/dags/{dag_id}/dagRuns/{dag_run_id}/taskInstances/{task_id}/logs/{try_number}``:
a try's log as Airflow 3.3's public API serves it (``get_log``), from what the worker shipped
(``assets_app.selectors.logs``).

- ``Accept: application/json`` (or ``*/*``, or none): ``{"content": [...],
  "continuation_token": ...}``, each line an Airflow ``StructuredLogMessage`` (a JSON line of
  Airflow's task SDK as it is, any other line ``{"event": line}``), after Airflow's group of
  "log message source details" on a first read;
- ``application/x-ndjson``: the same messages, one JSON object a line, the token in the
  ``Airflow-Continuation-Token`` header (what is stored now: the server does not wait for
  more, as Airflow's stream does);
- ``text/plain``: the log's text as stored, the token in the same header.

``continuation_token`` is ``null`` once nothing more will come (``task_log_complete``);
otherwise it is signed, and reading with it returns only what was stored since. A token the
server did not sign is Airflow's 400; ``full_content=true`` returns the log from its start
whatever the token. The body is streamed: the server holds a few chunks at a time, never the
whole log.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Annotated, Any, ClassVar

from django.core import signing
from django.http import HttpResponseBase, StreamingHttpResponse
from pydantic import Field
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request

from assets_app.models import TaskLog
from assets_app.selectors.logs import (
    TaskTryRef,
    log_lines,
    log_message,
    task_log_chunks,
    task_log_complete,
    task_log_of,
    task_try_by_key,
)
from publicapi.base import ANY, JSON, NDJSON, TEXT, PublicView, V, accepted, path_key
from publicapi.exceptions import BadRequest, NotFound
from publicapi.params import Query, Text, path_parse, query_parse

CONTINUATION_HEADER = "Airflow-Continuation-Token"
_SALT = "publicapi.logs.continuation"
#: The database's integer columns (a try number or map index beyond them names no try).
_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1
#: Bytes of JSON gathered before they are sent on.
_FLUSH_BYTES = 64 * 1024


class LogPath(Query):
    try_number: Annotated[int, Field(ge=0)]


class LogQuery(Query):
    full_content: bool = False
    map_index: int = -1
    token: Text | None = None


def _metadata(token: str | None) -> dict[str, Any]:
    """What a continuation token says (``{}`` without one); Airflow's 400 for a token this
    server did not sign."""
    if not token:
        return {}
    try:
        metadata = signing.loads(token, salt=_SALT)
    except signing.BadSignature:
        metadata = None
    if not isinstance(metadata, dict) or not isinstance(metadata.get("log_pos", 0), int):
        raise BadRequest("Bad Signature. Please use only the tokens provided by the API.")
    return metadata


class TaskInstanceLogView(PublicView):
    """Airflow's ``get_log`` (``TaskInstanceApi.get_log`` of its client)."""

    required_permissions: ClassVar = {"GET": [V + "taskinstance", V + "tasklog"]}

    def perform_content_negotiation(
        self, request: Request, force: bool = False
    ) -> tuple[BaseRenderer, str]:
        # errors are JSON; the log's own media type is chosen by ``accepted`` (Airflow's rule)
        return JSONRenderer(), JSON

    def get(
        self, request: Request, dag_id: str, dag_run_id: str, task_id: str, try_number: str
    ) -> HttpResponseBase:
        media_type = accepted(request.headers.get("Accept", ANY), offered=(JSON, NDJSON, TEXT))
        number = path_parse(LogPath, {"try_number": try_number}).try_number
        q = query_parse(LogQuery, request.query_params)
        metadata = _metadata(q.token)
        full_content = q.full_content or bool(metadata.get("download_logs"))
        ref = None
        if number <= _INT_MAX and _INT_MIN <= q.map_index <= _INT_MAX:
            ref = task_try_by_key(
                dag_id=path_key(dag_id),
                run_id=path_key(dag_run_id),
                task_id=path_key(task_id),
                map_index=q.map_index,
                try_number=number,
            )
        if ref is None:
            raise NotFound("TaskInstance not found")
        log = task_log_of(task_instance_id=ref.task_instance_id)
        first_read = full_content or "log_pos" not in metadata
        after = 0 if full_content else metadata.get("log_pos", 0)
        upto = log.chunk_count if log is not None else 0
        token = None
        if not task_log_complete(ref, log):
            token = signing.dumps(
                {"end_of_log": False, "log_pos": upto, "download_logs": full_content}, salt=_SALT
            )
        texts = _texts(log, after=after, upto=upto)
        if media_type == TEXT:
            return _streamed(
                (text.encode("utf-8") for text in texts), f"{TEXT}; charset=utf-8", token
            )
        messages = _messages(ref, texts, header=first_read)
        if media_type == NDJSON:
            lines = (json.dumps(m, ensure_ascii=False).encode("utf-8") + b"\n" for m in messages)
            return _streamed(_gathered(lines), NDJSON, token)
        return _streamed(_json_document(messages, token), JSON, None)


def _texts(log: TaskLog | None, *, after: int, upto: int) -> Iterator[str]:
    if log is None:
        return iter(())
    return (text for _, text in task_log_chunks(log_id=log.pk, after=after, upto=upto))


def _header(ref: TaskTryRef) -> list[dict[str, Any]]:
    """Airflow's first messages: where the log comes from, in a collapsed group."""
    host = ref.hostname or "an unknown host"
    return [
        {"event": "::group::Log message source details"},
        {"event": f"asset registry database (task_log), shipped by the worker on {host}"},
        {"event": "::endgroup::"},
    ]


def _messages(ref: TaskTryRef, texts: Iterable[str], *, header: bool) -> Iterator[dict[str, Any]]:
    if header:
        yield from _header(ref)
    for line in log_lines(texts):
        if line:
            yield log_message(line)


def _gathered(pieces: Iterable[bytes]) -> Iterator[bytes]:
    """``pieces`` sent on in blocks of about :data:`_FLUSH_BYTES`."""
    block: list[bytes] = []
    size = 0
    for piece in pieces:
        block.append(piece)
        size += len(piece)
        if size >= _FLUSH_BYTES:
            yield b"".join(block)
            block, size = [], 0
    if block:
        yield b"".join(block)


def _json_document(messages: Iterable[dict[str, Any]], token: str | None) -> Iterator[bytes]:
    """Airflow's ``TaskInstancesLogResponse``, written as the messages are read."""

    def pieces() -> Iterator[bytes]:
        yield b'{"content": ['
        separator = b""
        for message in messages:
            yield separator + json.dumps(message, ensure_ascii=False).encode("utf-8")
            separator = b", "
        yield b'], "continuation_token": ' + json.dumps(token).encode("ascii") + b"}"

    return _gathered(pieces())


def _streamed(body: Iterator[bytes], content_type: str, token: str | None) -> StreamingHttpResponse:
    response = StreamingHttpResponse(body, content_type=content_type)
    if token is not None:
        response[CONTINUATION_HEADER] = token
    return response
