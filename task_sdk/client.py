"""HTTP client for the execution API (the calls the Airflow 3 task SDK makes).

Sends ``Authorization: Bearer <token>`` and ``Airflow-API-Version`` on every request, retries
connection errors and 5xx responses with exponential backoff (4xx are final and raise
``ServerResponseError`` carrying the server's ``detail``), and adopts the token a response
hands back in ``Refreshed-API-Token``. Bodies are written with ``allow_nan=False``: a body
holding ``NaN`` or ``Infinity`` raises ``ValueError`` and is never sent.
"""

from __future__ import annotations

import functools
import getpass
import json
import logging
import platform
import socket
import ssl
import time
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any
from urllib.parse import quote

import httpx
import tenacity

from task_sdk import __version__
from task_sdk.jsonvalues import dumps
from task_sdk.timestamps import isoformat, now

logger = logging.getLogger(__name__)

API_VERSION = "2026-06-30"
REFRESHED_TOKEN_HEADER = "Refreshed-API-Token"  # noqa: S105 - a name, not a secret


class ServerResponseError(Exception):
    """The server answered with an error status (after retries for 5xx)."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.status_code = response.status_code
        self.detail = _detail(response)
        super().__init__(
            f"{response.request.method} {response.request.url.path} -> "
            f"{response.status_code}: {_describe(self.detail)}"
        )

    @property
    def reason(self) -> str | None:
        return self.detail.get("reason") if isinstance(self.detail, dict) else None


def _detail(response: httpx.Response) -> Any:
    try:
        body = response.json()
    except ValueError:
        return response.text or None
    return body.get("detail", body) if isinstance(body, dict) else body


def _describe(detail: Any) -> str:
    if isinstance(detail, dict):
        parts = [str(detail.get(k)) for k in ("reason", "message") if detail.get(k)]
        return ": ".join(parts) or json.dumps(detail)
    if isinstance(detail, list):
        return json.dumps(detail)
    return str(detail)


def json_object(response: httpx.Response) -> dict[str, Any]:
    """The response's body, which must be a JSON object (else ``httpx.DecodingError``)."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        request = response.request
        raise httpx.DecodingError(
            f"{request.method} {request.url.path}: expected a JSON object, "
            f"got {response.text[:200]!r}",
            request=request,
        )
    return body


@functools.cache
def hostname() -> str:
    """This worker's name, looked up once: ``getfqdn()`` may ask DNS, and heartbeats repeat it."""
    return socket.getfqdn() or platform.node()


@functools.cache
def ssl_context() -> ssl.SSLContext:
    """The verifying SSL context every client of this process shares, as ``httpx`` would build
    it (honouring ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``): building one loads the CA bundle,
    which takes longer than a whole request to a local server."""
    return httpx.create_ssl_context()


def _is_retryable(exc: BaseException) -> bool:
    if isinstance(exc, httpx.UnsupportedProtocol | httpx.LocalProtocolError):
        return False  # a bad URL or request, not a connection problem: retrying cannot help
    if isinstance(exc, httpx.TransportError):
        return True
    return isinstance(exc, ServerResponseError) and exc.status_code >= 500


#: The longest ``Retry-After`` honoured, in seconds (a larger one waits this long).
MAX_RETRY_AFTER = 60.0


class _RetryAfterOr:
    """Tenacity's wait: the server's ``Retry-After`` (seconds) when its 5xx answer names one
    (a 503 while its database is unavailable), if longer than ``backoff``'s wait."""

    def __init__(self, backoff: Callable[[tenacity.RetryCallState], float]) -> None:
        self.backoff = backoff

    def __call__(self, state: tenacity.RetryCallState) -> float:
        wait = self.backoff(state)
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, ServerResponseError):
            try:
                asked = float(exc.response.headers.get("Retry-After", ""))
            except ValueError:
                return wait
            if asked >= 0:
                return max(wait, min(asked, MAX_RETRY_AFTER))
        return wait


def execution_api_url(server: str) -> str:
    """``http://host:8000`` or ``http://host:8000/execution`` → the execution API base URL."""
    base = server.rstrip("/")
    return base if base.endswith("/execution") else f"{base}/execution"


class Client:
    """One task instance's connection to the execution API.

    ``retries`` is the number of attempts for retryable failures; the wait between attempts
    grows exponentially from ``backoff_initial`` up to ``backoff_max`` seconds.
    """

    def __init__(
        self,
        server: str,
        token: str,
        *,
        retries: int = 5,
        backoff_initial: float = 0.5,
        backoff_max: float = 10.0,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.token = token
        self._sleep = sleep
        self.retries = retries
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self._http = httpx.Client(
            base_url=execution_api_url(server),
            timeout=timeout,
            transport=transport,
            verify=ssl_context(),
            follow_redirects=False,
            headers={
                "Airflow-API-Version": API_VERSION,
                "User-Agent": f"asset-registry-task-sdk/{__version__} "
                f"(Python/{platform.python_version()})",
            },
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- transport -------------------------------------------------------------------------

    def _send_once(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        headers = {
            **kwargs.pop("headers", {}),
            "Authorization": f"Bearer {self.token}",
            "correlation-id": str(uuid.uuid4()),
        }
        response = self._http.request(method, path, headers=headers, **kwargs)
        if refreshed := response.headers.get(REFRESHED_TOKEN_HEADER):
            self.token = refreshed
        if response.is_redirect or response.status_code >= 300:
            error = ServerResponseError(response)
            logger.warning("%s %s failed: %s", method, path, error)
            raise error
        return response

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """Send one request, retrying connection errors and 5xx answers with backoff."""
        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception(_is_retryable),
            stop=tenacity.stop_after_attempt(max(1, self.retries)),
            wait=_RetryAfterOr(
                tenacity.wait_exponential(
                    multiplier=self.backoff_initial, min=0, max=self.backoff_max
                )
            ),
            before_sleep=lambda state: logger.warning(
                "retrying %s %s after attempt %s: %s",
                method,
                path,
                state.attempt_number,
                state.outcome.exception() if state.outcome else None,
            ),
            sleep=self._sleep,
            reraise=True,
        )
        return retrying(self._send_once, method, path, **kwargs)

    def _json(
        self, method: str, path: str, body: Any, params: dict[str, Any] | None = None
    ) -> httpx.Response:
        try:
            content = dumps(body)
        except ValueError as exc:  # NaN or Infinity (allow_nan=False), a circular reference
            raise ValueError(f"{method} {path}: the request body is not valid JSON: {exc}") from exc
        return self.request(
            method,
            path,
            params=params or {},
            content=content,
            headers={"Content-Type": "application/json"},
        )

    # -- task instances --------------------------------------------------------------------

    def start(
        self, ti_id: str, *, pid: int, when: datetime | None = None, host: str | None = None
    ) -> dict[str, Any]:
        """``PATCH /task-instances/{id}/run``: mark the TI running; returns the run context."""
        body = {
            "state": "running",
            "hostname": host or hostname(),
            "unixname": getpass.getuser(),
            "pid": pid,
            "start_date": isoformat(when or now()),
        }
        return json_object(self._json("PATCH", f"/task-instances/{ti_id}/run", body))

    def heartbeat(self, ti_id: str, *, pid: int, host: str | None = None) -> None:
        """``PUT /task-instances/{id}/heartbeat``."""
        body = {"hostname": host or hostname(), "pid": pid}
        self._json("PUT", f"/task-instances/{ti_id}/heartbeat", body)

    def succeed(
        self,
        ti_id: str,
        when: datetime,
        task_outlets: list[dict[str, Any]],
        outlet_events: list[dict[str, Any]],
        rendered_map_index: str | None = None,
    ) -> None:
        """``PATCH /task-instances/{id}/state`` with the success payload."""
        self._json(
            "PATCH",
            f"/task-instances/{ti_id}/state",
            success_body(when, task_outlets, outlet_events, rendered_map_index),
        )

    def finish(
        self,
        ti_id: str,
        state: str,
        when: datetime,
        rendered_map_index: str | None = None,
        retry_reason: str | None = None,
    ) -> None:
        """``PATCH /task-instances/{id}/state`` with a non-success terminal state (or
        ``up_for_retry``, with why in ``retry_reason``)."""
        if state == "success":
            raise ValueError("use succeed() for the success state")
        body: dict[str, Any] = {
            "state": state,
            "end_date": isoformat(when),
            "rendered_map_index": rendered_map_index,
        }
        if retry_reason is not None and state == "up_for_retry":
            body["retry_reason"] = retry_reason
        self._json("PATCH", f"/task-instances/{ti_id}/state", body)

    def set_rtif(self, ti_id: str, fields: dict[str, Any]) -> None:
        """``PUT /task-instances/{id}/rtif``: rendered template fields."""
        self._json("PUT", f"/task-instances/{ti_id}/rtif", fields)

    def validate_inlets_and_outlets(self, ti_id: str) -> dict[str, Any]:
        path = f"/task-instances/{ti_id}/validate-inlets-and-outlets"
        return json_object(self.request("GET", path))

    # -- xcoms and assets ------------------------------------------------------------------

    def xcom_set(
        self, dag_id: str, run_id: str, task_id: str, key: str, value: Any, map_index: int = -1
    ) -> None:
        params = {"map_index": map_index} if map_index >= 0 else {}
        path = "/xcoms/" + "/".join(quote(part, safe="") for part in (dag_id, run_id, task_id, key))
        self._json("POST", path, value, params=params)

    def xcom_get(
        self, dag_id: str, run_id: str, task_id: str, key: str, map_index: int = -1
    ) -> Any:
        params = {"map_index": map_index} if map_index >= 0 else {}
        path = "/xcoms/" + "/".join(quote(part, safe="") for part in (dag_id, run_id, task_id, key))
        return self.request("GET", path, params=params).json()

    def asset_by_name(self, name: str) -> dict[str, Any]:
        """``GET /assets/by-name``: the active asset called ``name``."""
        return json_object(self.request("GET", "/assets/by-name", params={"name": name}))

    def asset_by_uri(self, uri: str) -> dict[str, Any]:
        """``GET /assets/by-uri``: the active asset with ``uri``."""
        return json_object(self.request("GET", "/assets/by-uri", params={"uri": uri}))

    def asset_events(
        self,
        *,
        name: str | None = None,
        uri: str | None = None,
        alias_name: str | None = None,
        after: datetime | None = None,
        before: datetime | None = None,
        ascending: bool = True,
        limit: int | None = None,
    ) -> list[dict[str, Any]]:
        """Events of an asset (``GET /asset-events/by-asset?name=&uri=``) or emitted through an
        alias (``GET /asset-events/by-asset-alias?name=``), oldest first unless ``ascending`` is
        false; ``after``/``before`` are inclusive bounds.
        """
        params: dict[str, str | int] = {}
        if alias_name is not None:
            path = "/asset-events/by-asset-alias"
            params["name"] = alias_name
        elif name or uri:
            path = "/asset-events/by-asset"
            params.update({k: v for k, v in (("name", name), ("uri", uri)) if v})
        else:
            raise ValueError("asset_events() needs name, uri or alias_name")
        if after is not None:
            params["after"] = isoformat(after)
        if before is not None:
            params["before"] = isoformat(before)
        params["ascending"] = "true" if ascending else "false"
        if limit is not None:
            params["limit"] = limit
        response = self.request("GET", path, params=params)
        events = json_object(response).get("asset_events")
        if not isinstance(events, list):
            raise httpx.DecodingError(
                f"GET {path}: expected {{'asset_events': [...]}}, got {response.text[:200]!r}",
                request=response.request,
            )
        return events


def success_body(
    when: datetime,
    task_outlets: list[dict[str, Any]],
    outlet_events: list[dict[str, Any]],
    rendered_map_index: str | None = None,
) -> dict[str, Any]:
    """The body of a success ``/state`` call, key for key as the Airflow 3 client sends it."""
    return {
        "state": "success",
        "end_date": isoformat(when),
        "task_outlets": task_outlets,
        "outlet_events": outlet_events,
        "rendered_map_index": rendered_map_index,
    }
