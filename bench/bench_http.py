"""Benchmark the execution API end to end: success requests through a real gunicorn server.

Usage (from the repository root)::

    .venv/bin/python bench/bench_http.py                                  # SQLite scratch file
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/ar_bench \\
        .venv/bin/python bench/bench_http.py --requests 400 --clients 16

It creates a scratch database like the test runner does (``test_<name>`` on PostgreSQL, a
temporary file on SQLite), migrates it, declares the seed's example DAGs, starts gunicorn
(``--workers`` x ``--threads``) on a free port, and sends ``PATCH …/state`` successes from
``--clients`` concurrent HTTP clients, one per running task instance. It prints throughput
and latency percentiles per scenario, then drops the database.

Scenarios:

* ``asset``       the seed's first body: one declared asset, one event, two consumers queued;
* ``alias``       one declared alias emitting to a new asset per request (asset, link, event,
                  alias link and queue rows written);
* ``alias-shared`` every request emits through the same alias to the same asset (the
                  contended case: the same link and queue rows for every request).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")

import django  # noqa: E402

django.setup()

import httpx  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402

from assets_app.models import AssetEvent  # noqa: E402
from assets_app.services.dag_runs import (  # noqa: E402
    task_instance_create,
    task_instance_token_issue,
)
from devtools.processes import (  # noqa: E402
    ServerStartError,
    current_database_url,
    process_stop,
    server_start,
)

END = "2026-11-30T04:50:58.540508Z"


def body(scenario: str, n: int) -> dict:
    if scenario == "asset":
        return {
            "state": "success",
            "end_date": END,
            "task_outlets": [{"name": "s3://bucket/my-task", "uri": "s3://bucket/my-task"}],
            "outlet_events": [
                {
                    "key": {"name": "s3://bucket/my-task", "uri": "s3://bucket/my-task"},
                    "extra": {"n": n},
                    "asset_alias_events": [],
                }
            ],
            "asset_type": "Asset",
        }
    target = f"s3://bucket/dyn/{n}" if scenario == "alias" else "s3://bucket/my-task"
    return {
        "state": "success",
        "end_date": END,
        "task_outlets": [{"name": "example-alias", "uri": None, "type": "AssetAlias"}],
        "outlet_events": [
            {
                "source_alias_name": "example-alias",
                "dest_asset_key": {"name": target, "uri": target},
                "dest_asset_extra": {},
                "extra": {"n": n},
            }
        ],
        "rendered_map_index": None,
    }


def start_server(workers: int, threads: int) -> tuple[subprocess.Popen[bytes], str]:
    env = dict(os.environ, DATABASE_URL=current_database_url(), PYTHONPATH=str(REPO))
    env["DJANGO_SETTINGS_MODULE"] = "config.settings.test"
    log = tempfile.NamedTemporaryFile(prefix="bench-http-", suffix=".log", delete=False)  # noqa: SIM115
    try:
        return server_start(env=env, stdout=log, workers=workers, threads=threads)
    except ServerStartError as exc:
        raise SystemExit(f"{exc}, see {log.name}") from exc


def run_scenario(url: str, scenario: str, requests: int, clients: int) -> None:
    tasks = []
    for n in range(requests):
        ti = task_instance_create(
            dag_id="asset_alias_example_alias_producer"
            if scenario.startswith("alias")
            else "asset_s3_bucket_producer",
            task_id="produce_asset_events_through_asset_alias"
            if scenario.startswith("alias")
            else "produce_asset_events",
            run_id=f"bench_{scenario}_{n}",
            state="running",
        ).task_instance
        tasks.append((str(ti.pk), task_instance_token_issue(task_instance_id=ti.pk), n))
    events_before = AssetEvent.objects.count()

    def send(task: tuple[str, str, int]) -> tuple[int, float]:
        ti_id, token, n = task
        started = time.perf_counter()
        response = http.patch(
            f"{url}/execution/task-instances/{ti_id}/state",
            json=body(scenario, n),
            headers={"Authorization": f"Bearer {token}", "Airflow-API-Version": "2026-06-30"},
        )
        return response.status_code, time.perf_counter() - started

    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    with httpx.Client(timeout=60, limits=limits) as http, ThreadPoolExecutor(clients) as pool:
        started = time.perf_counter()
        results = list(pool.map(send, tasks))
        elapsed = time.perf_counter() - started
    codes = [code for code, _ in results]
    latencies = sorted(latency * 1000 for _, latency in results)
    bad = [code for code in codes if code != 204]
    new_events = AssetEvent.objects.count() - events_before
    print(
        f"{scenario:<13} {requests:>6} {requests / elapsed:>9.1f} "
        f"{statistics.median(latencies):>8.1f} {latencies[int(len(latencies) * 0.95) - 1]:>8.1f} "
        f"{latencies[-1]:>8.1f} {new_events:>7}  {'all 204' if not bad else f'{len(bad)} not 204'}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300, help="success requests per scenario")
    parser.add_argument("--clients", type=int, default=16, help="concurrent HTTP clients")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn worker processes")
    parser.add_argument("--threads", type=int, default=8, help="threads per worker")
    args = parser.parse_args()

    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=False)
    process = None
    try:
        call_command("declare_dags", str(REPO / "examples" / "dags.yaml"), verbosity=0)
        process, url = start_server(args.workers, args.threads)
        print(
            f"{connection.vendor}, gunicorn {args.workers} workers x {args.threads} threads, "
            f"{args.clients} concurrent clients"
        )
        print(
            f"{'scenario':<13} {'reqs':>6} {'req/s':>9} {'p50 ms':>8} {'p95 ms':>8} "
            f"{'max ms':>8} {'events':>7}  status"
        )
        for scenario in ("asset", "alias", "alias-shared"):
            run_scenario(url, scenario, args.requests, args.clients)
    finally:
        if process is not None:
            process_stop(process)
        connection.close()
        connection.creation.destroy_test_db(old_name, verbosity=0, keepdb=False)


if __name__ == "__main__":
    main()
