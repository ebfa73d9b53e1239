"""task_sdk end to end: the real CLI (a subprocess) runs a real task process under the
supervisor, which talks HTTP to a live gunicorn server on the test database.

Each test declares DAGs (so the assets are active), creates a queued task instance with its
token, runs ``python -m task_sdk run`` and then checks the rows the server wrote.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
import yaml

from assets_app.models import (
    Asset,
    AssetActive,
    AssetAliasAsset,
    AssetAliasAssetEvent,
    AssetDagRunQueue,
    AssetEvent,
    TaskInstance,
    XCom,
)
from assets_app.services.dags.declare import dags_declare
from assets_app.services.dags.manifest import manifest_parse
from assets_app.services.runs.claims import task_instances_claim
from assets_app.services.runs.dag_runs import task_instance_create
from assets_app.services.scheduling.scheduler import scheduler_pass
from assets_app.tokens import token_issue
from tests.live_server import REPO

pytestmark = pytest.mark.slow

TASKS = Path(__file__).resolve().parent / "e2e_tasks.py"

MANIFEST = """
dags:
  - dag_id: e2e_producer
    tasks:
      - task_id: asset_with_extra
        outlets: [{asset: {name: orders, uri: "s3://e2e/orders"}}]
      - task_id: alias_two_assets
        outlets: [{alias: e2e-alias}]
      - task_id: mixed
        outlets:
          - {asset: {name: orders, uri: "s3://e2e/orders"}}
          - {alias: e2e-alias}
          - {asset_ref: {name: by_name}}
      - task_id: raises
        outlets: [{asset: {name: orders, uri: "s3://e2e/orders"}}]
      - task_id: killed
        outlets: [{asset: {name: orders, uri: "s3://e2e/orders"}}]
      - task_id: returns_value
        outlets: [{asset: {name: orders, uri: "s3://e2e/orders"}}]
      - task_id: nan_extra
        outlets: [{asset: {name: orders, uri: "s3://e2e/orders"}}]
  - dag_id: e2e_orders_consumer
    schedule: {asset: {name: orders, uri: "s3://e2e/orders"}}
    tasks:
      - task_id: consume
        inlets: [{asset: {name: orders, uri: "s3://e2e/orders"}}, {alias: e2e-alias}]
  - dag_id: e2e_alias_consumer
    schedule: {alias: e2e-alias}
    tasks: [{task_id: consume}]
  - dag_id: e2e_other
    tasks:
      - task_id: uses
        inlets:
          - {asset: {name: existing, uri: "s3://e2e/existing"}}
          - {asset: {name: by_name, uri: "s3://e2e/by-name"}}
"""


@dataclass
class Run:
    ti: TaskInstance
    process: subprocess.CompletedProcess

    @property
    def events(self) -> list[AssetEvent]:
        return list(
            AssetEvent.objects.filter(source_run_id=self.ti.run_id, source_task_id=self.ti.task_id)
            .select_related("asset")
            .order_by("id")
        )


@pytest.fixture
def declared(transactional_db):
    dags_declare(manifest=manifest_parse(yaml.safe_load(MANIFEST)), fileloc="e2e.yaml")


def run_task(server_url: str, task_id: str, *, run_id: str = "manual__e2e") -> Run:
    ti = task_instance_create(dag_id="e2e_producer", task_id=task_id, run_id=run_id).task_instance
    return run_task_instance(server_url, ti)


def run_task_instance(server_url: str, ti: TaskInstance, task: str | None = None) -> Run:
    """Run ``task`` (default ``e2e_tasks.py:<the task id>``) for ``ti`` through the CLI."""
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "TASK_SDK_SERVER": server_url,
        "TASK_SDK_TI_ID": str(ti.pk),
        "TASK_SDK_TOKEN": token_issue(task_instance_id=ti.pk),
        "TASK_SDK_HEARTBEAT_INTERVAL": "0.2",
    }
    process = subprocess.run(
        [sys.executable, "-m", "task_sdk", "run", task or f"{TASKS}:{ti.task_id}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    ti.refresh_from_db()
    return Run(ti=ti, process=process)


def test_asset_outlet_with_extra(server, declared):
    run = run_task(server.url, "asset_with_extra")

    assert run.process.returncode == 0, run.process.stderr
    assert run.ti.state == "success"
    assert run.ti.end_date is not None
    assert run.ti.hostname
    assert run.ti.pid
    assert "[stdout] producing orders" in run.process.stderr  # the task's log, captured
    [event] = run.events
    assert (event.asset.name, event.asset.uri) == ("orders", "s3://e2e/orders")
    assert event.extra == {"rows": 42}
    assert (event.source_dag_id, event.source_run_id, event.source_map_index) == (
        "e2e_producer",
        "manual__e2e",
        -1,
    )
    assert AssetDagRunQueue.objects.filter(
        asset=event.asset, target_dag_id="e2e_orders_consumer"
    ).exists()


def test_alias_outlet_adds_two_assets_one_new(server, declared):
    assert not Asset.objects.filter(uri="s3://e2e/brand-new").exists()

    run = run_task(server.url, "alias_two_assets")

    assert run.process.returncode == 0, run.process.stderr
    assert run.ti.state == "success"
    events = {e.asset.name: e for e in run.events}
    assert set(events) == {"existing", "brand_new"}
    assert all(e.extra == {"via": "alias"} for e in events.values())
    new = Asset.objects.get(uri="s3://e2e/brand-new")
    assert new.name == "brand_new"
    assert new.extra == {"created": "by alias"}
    assert not AssetActive.objects.filter(asset=new).exists()  # alias targets need not be active
    linked = set(
        AssetAliasAsset.objects.filter(alias__name="e2e-alias").values_list(
            "asset__name", flat=True
        )
    )
    assert linked == {"existing", "brand_new"}
    for event in events.values():
        assert list(
            AssetAliasAssetEvent.objects.filter(event=event).values_list("alias__name", flat=True)
        ) == ["e2e-alias"]
    queued = set(AssetDagRunQueue.objects.values_list("asset__name", "target_dag_id"))
    assert ("existing", "e2e_alias_consumer") in queued
    assert ("brand_new", "e2e_alias_consumer") in queued


def test_mixed_asset_alias_and_name_ref(server, declared):
    run = run_task(server.url, "mixed")

    assert run.process.returncode == 0, run.process.stderr
    assert run.ti.state == "success"
    got = sorted((e.asset.name, e.extra.get("kind")) for e in run.events)
    assert got == [("aliased", "alias"), ("by_name", "name ref"), ("orders", "direct")]
    aliased = next(e for e in run.events if e.asset.name == "aliased")
    assert AssetAliasAssetEvent.objects.filter(event=aliased, alias__name="e2e-alias").exists()
    direct = [e for e in run.events if e.asset.name != "aliased"]
    assert not AssetAliasAssetEvent.objects.filter(event__in=direct).exists()


def test_task_that_raises_fails_without_events(server, declared):
    run = run_task(server.url, "raises")

    assert run.process.returncode == 1
    assert run.process.stderr.strip().splitlines()[-1] == (
        "error: task failed: RuntimeError: the task broke"
    )
    assert run.ti.state == "failed"
    assert run.events == []
    assert not AssetEvent.objects.exists()


def test_killed_task_process_fails_the_task_instance(server, declared):
    run = run_task(server.url, "killed")

    assert run.process.returncode == 1
    last_line = run.process.stderr.strip().splitlines()[-1]
    assert last_line == "error: task process killed by SIGKILL without reporting a state"
    assert run.ti.state == "failed"
    assert run.events == []


def test_return_value_is_stored_as_xcom(server, declared):
    run = run_task(server.url, "returns_value", run_id="manual__2026-01-01T00:00:00+00:00")

    assert run.process.returncode == 0, run.process.stderr
    xcom = XCom.objects.get(run_id=run.ti.run_id, task_id="returns_value", key="return_value")
    assert xcom.value == {"answer": 42, "run": "manual__2026-01-01T00:00:00+00:00"}
    assert xcom.map_index == -1
    [event] = run.events  # an untouched declared outlet still gets its event
    assert event.extra == {}


# -- a proxy that answers 503 to the first success call --------------------------------------


@dataclass
class FlakyProxy:
    url: str
    state_calls: list[int]  # status the proxy answered for each PATCH …/state


@pytest.fixture
def flaky_proxy(server, request) -> Iterator[FlakyProxy]:
    """Forwards to the live server; the first ``PATCH …/state`` gets a 503.

    ``request.param`` is ``"before"`` (the 503 replaces the call, the server never sees it)
    or ``"after"`` (the server records the success, then the answer is lost as a 503).
    """
    mode = request.param
    state_calls: list[int] = []
    upstream = httpx.Client(base_url=server.url, timeout=60)
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def _forward(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            headers = {
                k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")
            }
            is_state = self.command == "PATCH" and self.path.endswith("/state")
            with lock:
                fail_this = is_state and not state_calls
            response = None
            if not (fail_this and mode == "before"):
                response = upstream.request(self.command, self.path, content=body, headers=headers)
            if fail_this:
                payload = b'{"detail":{"reason":"unavailable","message":"injected by the proxy"}}'
                status, out_headers = 503, {"Content-Type": "application/json"}
            else:
                payload, status = response.content, response.status_code
                out_headers = {
                    k: v
                    for k, v in response.headers.items()
                    if k.lower() in ("content-type", "refreshed-api-token")
                }
            if is_state:
                with lock:
                    state_calls.append(status)
            self.send_response(status)
            for key, value in out_headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_PATCH = do_PUT = do_POST = _forward  # noqa: N815

        def log_message(self, *args: object) -> None:
            pass

    proxy = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    try:
        yield FlakyProxy(url=f"http://127.0.0.1:{proxy.server_address[1]}", state_calls=state_calls)
    finally:
        proxy.shutdown()
        proxy.server_close()
        upstream.close()


@pytest.mark.parametrize("flaky_proxy", ["before", "after"], indirect=True)
def test_success_call_hit_by_a_503_is_retried_once_recorded(flaky_proxy, declared):
    run = run_task(flaky_proxy.url, "asset_with_extra")

    assert run.process.returncode == 0, run.process.stderr
    assert flaky_proxy.state_calls[0] == 503
    assert flaky_proxy.state_calls[1] in (200, 204)  # "after": the repeat is answered 200
    assert len(flaky_proxy.state_calls) == 2
    assert "retrying PATCH" in run.process.stderr
    assert run.ti.state == "success"
    [event] = run.events  # exactly one set of events
    assert event.extra == {"rows": 42}
    assert AssetEvent.objects.count() == 1


def test_unstorable_extra_fails_the_task_before_anything_is_sent(server, declared):
    run = run_task(server.url, "nan_extra")

    assert run.process.returncode == 1
    assert run.process.stderr.strip().splitlines()[-1] == (
        "error: task failed: ValueError: outlet_events[Asset(name='orders', "
        "uri='s3://e2e/orders')].extra['ratio']: NaN is not valid JSON"
    )
    assert "retrying" not in run.process.stderr  # no request was refused and retried
    assert run.ti.state == "failed"  # not left running
    assert run.ti.end_date is not None
    assert not AssetEvent.objects.exists()


def test_consumer_reads_the_events_the_producers_recorded(server, declared):
    # given: two producer runs of the orders asset, one alias producer, and the scheduler's
    # asset-triggered run of the consumer DAG
    first = run_task(server.url, "asset_with_extra", run_id="manual__first")
    second = run_task(server.url, "asset_with_extra", run_id="manual__second")
    aliased = run_task(server.url, "alias_two_assets", run_id="manual__aliased")
    assert [r.process.returncode for r in (first, second, aliased)] == [0, 0, 0]
    [first_event], [second_event] = first.events, second.events
    [created] = [run for run in scheduler_pass().created if run.dag_id == "e2e_orders_consumer"]
    (consumer,) = task_instances_claim(limit=1)  # as the worker does
    assert (consumer.dag_id, consumer.task_id) == ("e2e_orders_consumer", "consume")
    assert consumer.run_id == created.run_id

    # when
    run = run_task_instance(server.url, consumer)

    # then
    assert run.process.returncode == 0, run.process.stderr
    assert run.ti.state == "success"
    seen = XCom.objects.get(run_id=consumer.run_id, task_id="consume", key="return_value").value
    assert seen["newest"] == [second_event.pk, "manual__second", {"rows": 42}]
    assert seen["history"] == [
        [first_event.pk, "manual__first", "asset_with_extra"],
        [second_event.pk, "manual__second", "asset_with_extra"],
    ]
    assert seen["through_alias"] == ["brand_new", "existing"]
    assert seen["triggering"] == [
        ["e2e_producer", "manual__first", "s3://e2e/orders", {"rows": 42}],
        ["e2e_producer", "manual__second", "s3://e2e/orders", {"rows": 42}],
    ]
    assert seen["timestamps_aware"] is True
    assert seen["triggering_keys"] == ["orders"]
