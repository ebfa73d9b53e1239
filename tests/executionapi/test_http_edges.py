"""HTTP edges (issue #10): every path under /execution/ answers JSON, and a chunked request
body (no Content-Length) is read as the body it is, through a real gunicorn."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from rest_framework.test import APIClient

from assets_app.tokens import token_issue
from tests.executionapi.conftest import state_url
from tests.factories import TaskInstanceFactory
from tests.live_server import serve


@pytest.mark.parametrize(
    "path",
    [
        "/execution/x%0A",
        "/execution/%0A",
        "/execution/a%0Ab",
        "/execution/task-instances/%0A/state",
        "/execution/task-instances/0195e0b8-0000-7000-8000-000000000000/state%0A",
        "/execution/assets/by-name%0D%0A",
        "/execution",
    ],
)
def test_every_execution_path_answers_json(path):
    response = APIClient().get(path)

    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert response.json()["detail"]["reason"] == "not_found"


# --- chunked bodies through gunicorn --------------------------------------------------------


@pytest.fixture
def one_worker_server(transactional_db, tmp_path) -> Iterator[str]:
    yield from (server.url for server in serve(tmp_path, workers=1, threads=2))


def _chunked(url: str, method: str, path: str, body: bytes, token: str) -> tuple[int, dict]:
    """Send ``body`` in 3 chunks, without Content-Length."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    third = max(1, len(body) // 3)
    chunks = iter([body[:third], body[third : 2 * third], body[2 * third :]])
    try:
        connection.request(
            method,
            path,
            body=chunks,
            headers={
                "Authorization": f"Bearer {token}",
                "Content-Type": "application/json",
            },
            encode_chunked=True,
        )
        response = connection.getresponse()
        raw = response.read()
        return response.status, json.loads(raw) if raw else {}
    finally:
        connection.close()


@pytest.mark.django_db(transaction=True)
def test_a_chunked_body_is_read(one_worker_server):
    ti = TaskInstanceFactory(state="running")
    body = json.dumps({"state": "failed", "end_date": "2026-01-01T00:00:00Z"}).encode()

    status, answer = _chunked(
        one_worker_server, "PATCH", state_url(ti), body, token_issue(task_instance_id=ti.pk)
    )

    assert (status, answer) == (204, {})
    ti.refresh_from_db()
    assert ti.state == "failed"


@pytest.mark.slow  # its own server, with a lower limit
@pytest.mark.django_db(transaction=True)
def test_a_chunked_body_over_the_limit_is_413(transactional_db, tmp_path):
    ti = TaskInstanceFactory(state="running")
    body = json.dumps({"state": "failed", "end_date": "2026-01-01T00:00:00Z", "x": "y" * 2000})
    for server in serve(
        tmp_path, workers=1, threads=2, env={"EXECUTION_API_MAX_BODY_BYTES": "1000"}
    ):
        status, answer = _chunked(
            server.url, "PATCH", state_url(ti), body.encode(), token_issue(task_instance_id=ti.pk)
        )

    assert status == 413
    assert answer["detail"]["reason"] == "payload_too_large"
    ti.refresh_from_db()
    assert ti.state == "running"
