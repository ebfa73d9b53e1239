"""Test doubles for the task_sdk unit tests: an in-memory execution API for httpx."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
SAMPLES = HERE / "wire_samples"
TASKS = HERE / "sample_tasks.py"
TI_ID = "0198d6a2-7d36-7b39-8f4e-7c1f0b2d9a11"


def sample(name: str) -> str:
    return (SAMPLES / name).read_text().strip()


def task_ref(function: str) -> str:
    return f"{TASKS}:{function}"


ASSETS = {
    "by_name_asset": {
        "name": "by_name_asset",
        "uri": "s3://bucket/by-name",
        "group": "asset",
        "extra": {"ref": "name"},
    },
    "by_uri_asset": {
        "name": "by_uri_asset",
        "uri": "s3://bucket/by-uri",
        "group": "asset",
        "extra": {},
    },
}


def stored_event(
    event_id: int,
    timestamp: str,
    *,
    name: str = "orders",
    uri: str = "s3://bucket/orders",
    extra: dict[str, Any] | None = None,
    aliases: tuple[str, ...] = (),
) -> dict[str, Any]:
    """An event as ``/asset-events`` returns it, plus ``_aliases`` (what it was emitted through,
    which that route does not show)."""
    return {
        "id": event_id,
        "timestamp": timestamp,
        "extra": extra if extra is not None else {"n": event_id},
        "asset": {"name": name, "uri": uri, "group": "asset", "extra": {}},
        "created_dagruns": [],
        "source_task_id": "produce",
        "source_dag_id": "producer",
        "source_run_id": f"manual__{event_id}",
        "source_map_index": -1,
        "partition_key": None,
        "_aliases": list(aliases),
    }


def _when(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


@dataclass
class FakeExecutionAPI:
    """Answers the execution API routes like the server does and records every request.

    ``faults`` maps "METHOD suffix" (e.g. "PATCH /state") to a list of status codes to answer
    before behaving normally. ``asset_events`` (see :func:`stored_event`) are served by
    ``/asset-events/by-asset`` and ``by-asset-alias`` with the server's filters.
    """

    run_context: dict[str, Any] = field(
        default_factory=lambda: json.loads(sample("run_response_minimal.json"))
    )
    faults: dict[str, list[int]] = field(default_factory=dict)
    heartbeat_status: int = 204
    asset_events: list[dict[str, Any]] = field(default_factory=list)
    requests: list[httpx.Request] = field(default_factory=list)

    def _events(self, request: httpx.Request) -> httpx.Response:
        params = request.url.params
        if request.url.path.endswith("/by-asset-alias"):
            events = [e for e in self.asset_events if params["name"] in e["_aliases"]]
        else:
            name, uri = params.get("name"), params.get("uri")
            if not name and not uri:
                detail = {"reason": "missing_parameter", "message": "name or uri"}
                return httpx.Response(400, json={"detail": detail})
            events = [
                e
                for e in self.asset_events
                if (not name or e["asset"]["name"] == name)
                and (not uri or e["asset"]["uri"] == uri)
            ]
        if "after" in params:
            events = [e for e in events if _when(e["timestamp"]) >= _when(params["after"])]
        if "before" in params:
            events = [e for e in events if _when(e["timestamp"]) <= _when(params["before"])]
        events.sort(
            key=lambda e: (_when(e["timestamp"]), e["id"]),
            reverse=params.get("ascending", "true") == "false",
        )
        if "limit" in params:
            events = events[: int(params["limit"])]
        shown = [{k: v for k, v in e.items() if k != "_aliases"} for e in events]
        return httpx.Response(200, json={"asset_events": shown})

    def event_queries(self) -> list[tuple[str, dict[str, str]]]:
        """``(route, query parameters)`` of every ``/asset-events`` request, in order."""
        return [
            (r.url.path.rsplit("/", 1)[-1], dict(r.url.params))
            for r in self.requests
            if "/asset-events/" in r.url.path
        ]

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        path = request.url.path
        route = f"{request.method} /{path.rsplit('/', 1)[-1]}"
        if self.faults.get(route):
            status = self.faults[route].pop(0)
            return httpx.Response(
                status, json={"detail": {"reason": "fault", "message": "injected"}}
            )
        if route == "PATCH /run":
            return httpx.Response(200, json=self.run_context)
        if route == "PUT /heartbeat":
            if self.heartbeat_status >= 400:
                detail = {"reason": "not_running", "message": "TI is no longer running"}
                return httpx.Response(self.heartbeat_status, json={"detail": detail})
            return httpx.Response(self.heartbeat_status)
        if route == "PATCH /state":
            return httpx.Response(204)
        if path.endswith("/assets/by-name") or path.endswith("/assets/by-uri"):
            wanted = request.url.params.get("name") or request.url.params.get("uri")
            for asset in ASSETS.values():
                if wanted in (asset["name"], asset["uri"]):
                    return httpx.Response(200, json=asset)
            return httpx.Response(
                404, json={"detail": {"reason": "not_found", "message": "no asset"}}
            )
        if "/asset-events/" in path and request.method == "GET":
            return self._events(request)
        if re.search(r"/xcoms/", path) and request.method == "POST":
            return httpx.Response(201, json={"message": "XCom successfully set"})
        return httpx.Response(404, json={"detail": {"reason": "not_found", "message": path}})

    def bodies(self, route: str) -> list[str]:
        return [
            r.content.decode()
            for r in self.requests
            if f"{r.method} /{r.url.path.rsplit('/', 1)[-1]}" == route
        ]


def make_client(api: FakeExecutionAPI, **kwargs: Any):
    from task_sdk.client import Client

    kwargs.setdefault("sleep", lambda seconds: None)
    return Client("http://server.test", "token-1", transport=httpx.MockTransport(api), **kwargs)
