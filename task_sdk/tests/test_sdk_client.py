"""The HTTP client: headers, retries with backoff (connection errors and 5xx only), final
4xx with the server's detail, adoption of refreshed tokens."""

import json
import threading
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from sdk_helpers import TI_ID, FakeExecutionAPI, make_client

from task_sdk.client import Client, ServerResponseError, execution_api_url, isoformat

WHEN = datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC)


def test_execution_api_url():
    assert execution_api_url("http://h:1") == "http://h:1/execution"
    assert execution_api_url("http://h:1/") == "http://h:1/execution"
    assert execution_api_url("http://h:1/execution/") == "http://h:1/execution"


def test_isoformat_is_utc_with_z_and_rejects_naive():
    assert isoformat(WHEN) == "2026-01-02T03:04:05.000006Z"
    with pytest.raises(ValueError, match="timezone-aware"):
        isoformat(datetime(2026, 1, 1))  # noqa: DTZ001


@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_5xx_is_retried_then_succeeds(status):
    api = FakeExecutionAPI(faults={"PATCH /state": [status, status]})
    with make_client(api) as client:
        client.succeed(TI_ID, WHEN, [], [])
    bodies = api.bodies("PATCH /state")
    assert len(bodies) == 3
    assert len(set(bodies)) == 1  # the identical body every time


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 422])
def test_4xx_is_final_and_carries_the_detail(status):
    api = FakeExecutionAPI(faults={"PATCH /state": [status]})
    with make_client(api) as client, pytest.raises(ServerResponseError) as raised:
        client.finish(TI_ID, "failed", WHEN)
    assert len(api.bodies("PATCH /state")) == 1
    assert raised.value.status_code == status
    assert raised.value.detail == {"reason": "fault", "message": "injected"}
    assert raised.value.reason == "fault"
    assert "fault: injected" in str(raised.value)


def test_gives_up_after_the_configured_attempts():
    api = FakeExecutionAPI(faults={"PATCH /state": [503] * 10})
    with make_client(api, retries=4) as client, pytest.raises(ServerResponseError) as raised:
        client.succeed(TI_ID, WHEN, [], [])
    assert raised.value.status_code == 503
    assert len(api.bodies("PATCH /state")) == 4


def test_backoff_grows_exponentially():
    waits = []
    api = FakeExecutionAPI(faults={"PATCH /state": [503] * 4})
    with make_client(api, sleep=waits.append, backoff_initial=0.5, backoff_max=3) as client:
        client.succeed(TI_ID, WHEN, [], [])
    assert waits == [0.5, 1.0, 2.0, 3.0]


@pytest.mark.parametrize(
    ("retry_after", "waits"),
    [("7", [7.0, 7.0]), ("0.1", [0.5, 1.0]), ("600", [60.0, 60.0]), ("soon", [0.5, 1.0])],
)
def test_a_503_with_retry_after_waits_that_long_when_longer_than_the_backoff(retry_after, waits):
    """The server answers 503 with Retry-After while its database is unavailable: the client
    waits as asked (at most a minute), else its own backoff."""
    answers = iter([503, 503, 204])
    slept: list[float] = []

    def handler(request: httpx.Request) -> httpx.Response:
        status = next(answers)
        if status == 503:
            body = {"detail": {"reason": "database_unavailable", "message": "retry"}}
            return httpx.Response(503, json=body, headers={"Retry-After": retry_after})
        return httpx.Response(status)

    with Client(
        "http://registry.test",
        "token",
        transport=httpx.MockTransport(handler),
        sleep=slept.append,
        backoff_initial=0.5,
    ) as client:
        client.heartbeat(TI_ID, host="worker-1", pid=1)

    assert slept == waits


def test_connection_errors_are_retried():
    calls = []

    def handler(request):
        calls.append(request)
        if len(calls) < 3:
            raise httpx.ConnectError("refused", request=request)
        return httpx.Response(204)

    with Client("http://x", "t", transport=httpx.MockTransport(handler), sleep=lambda s: None) as c:
        c.heartbeat(TI_ID, pid=1)
    assert len(calls) == 3


def test_redirects_are_errors_not_followed():
    def handler(request):
        return httpx.Response(307, headers={"Location": "http://x/elsewhere"})

    client = Client("http://x", "t", transport=httpx.MockTransport(handler))
    with client, pytest.raises(ServerResponseError) as raised:
        client.heartbeat(TI_ID, pid=1)
    assert raised.value.status_code == 307


def test_refreshed_token_is_adopted_even_on_errors():
    seen = []

    def handler(request):
        seen.append(request.headers["authorization"])
        if len(seen) == 1:
            return httpx.Response(204, headers={"Refreshed-API-Token": "fresh-1"})
        if len(seen) == 2:
            return httpx.Response(503, headers={"Refreshed-API-Token": "fresh-2"})
        return httpx.Response(204)

    with Client(
        "http://x", "old", transport=httpx.MockTransport(handler), sleep=lambda s: None
    ) as c:
        c.heartbeat(TI_ID, pid=1)
        c.heartbeat(TI_ID, pid=1)
    assert seen == ["Bearer old", "Bearer fresh-1", "Bearer fresh-2"]
    assert c.token == "fresh-2"


def test_validation_error_detail_list_is_kept():
    def handler(request):
        return httpx.Response(422, json={"detail": [{"loc": ["body", "x"], "msg": "bad"}]})

    client = Client("http://x", "t", transport=httpx.MockTransport(handler))
    with client, pytest.raises(ServerResponseError) as raised:
        client.finish(TI_ID, "failed", WHEN)
    assert raised.value.detail == [{"loc": ["body", "x"], "msg": "bad"}]


def test_a_retry_carries_its_reason_and_a_failure_does_not():
    api = FakeExecutionAPI()
    with make_client(api) as client:
        client.finish(TI_ID, "up_for_retry", WHEN, retry_reason="KeyError: 'customer_id'")
        client.finish(TI_ID, "failed", WHEN, retry_reason="not on the wire for a failure")
    retry, failure = (json.loads(body) for body in api.bodies("PATCH /state"))
    assert retry["retry_reason"] == "KeyError: 'customer_id'"
    assert "retry_reason" not in failure  # TITerminalStatePayload forbids extra fields


def test_finish_refuses_success():
    client = Client("http://x", "t", transport=httpx.MockTransport(FakeExecutionAPI()))
    with client, pytest.raises(ValueError, match="succeed"):
        client.finish(TI_ID, "success", WHEN)


def test_asset_lookups_and_xcom_paths():
    api = FakeExecutionAPI()
    with make_client(api) as client:
        assert client.asset_by_name("by_name_asset")["uri"] == "s3://bucket/by-name"
        assert client.asset_by_uri("s3://bucket/by-uri")["name"] == "by_uri_asset"
        with pytest.raises(ServerResponseError) as raised:
            client.asset_by_name("missing")
        client.xcom_set("dag", "manual__2026-01-01T00:00:00+00:00", "t", "return_value", {"a": 1})
    assert raised.value.reason == "not_found"
    xcom = api.requests[-1]
    assert xcom.url.raw_path.decode() == (
        "/execution/xcoms/dag/manual__2026-01-01T00%3A00%3A00%2B00%3A00/t/return_value"
    )
    assert json.loads(xcom.content) == {"a": 1}


class _FlakyHandler(BaseHTTPRequestHandler):
    """A real HTTP server: the first PATCH answers 503, later ones 204 with a fresh token."""

    requests: list = []

    def do_PATCH(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).requests.append((self.path, dict(self.headers), body))
        if len(type(self).requests) == 1:
            payload = json.dumps({"detail": {"reason": "db", "message": "down"}}).encode()
            self.send_response(503)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        self.send_response(204)
        self.send_header("Refreshed-API-Token", "fresh")
        self.end_headers()

    def log_message(self, *args):
        pass


def test_against_a_real_local_http_server():
    _FlakyHandler.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FlakyHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        with Client(url, "tok", backoff_initial=0.01) as client:
            client.succeed(TI_ID, WHEN, [], [])
            assert client.token == "fresh"
    finally:
        server.shutdown()
        server.server_close()
    assert len(_FlakyHandler.requests) == 2
    path, headers, body = _FlakyHandler.requests[1]
    assert path == f"/execution/task-instances/{TI_ID}/state"
    assert headers["Authorization"] == "Bearer tok"
    assert headers["Airflow-API-Version"] == "2026-06-30"
    assert json.loads(body)["state"] == "success"


def test_connection_refused_is_retried_then_raised():
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    waits = []
    client = Client(f"http://127.0.0.1:{port}", "t", retries=3, sleep=waits.append)
    with client, pytest.raises(httpx.ConnectError):
        client.heartbeat(TI_ID, pid=1)
    assert len(waits) == 2  # three attempts


def test_a_server_url_without_http_scheme_is_not_retried():
    # not a connection error: retrying cannot help, it only delays the error
    waits = []
    client = Client("localhost:8000", "t", sleep=waits.append)
    with client, pytest.raises(httpx.UnsupportedProtocol):
        client.heartbeat(TI_ID, pid=1)
    assert waits == []
