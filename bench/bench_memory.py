"""Benchmark a gunicorn worker's peak memory while it answers large event lists.

Usage (from the repository root)::

    .venv/bin/python bench/bench_memory.py                    # PostgreSQL on 127.0.0.1
    .venv/bin/python bench/bench_memory.py --events 20000 --clients 8 --extra-bytes 500
    DATABASE_URL=sqlite:///x .venv/bin/python bench/bench_memory.py     # SQLite

It creates a scratch database ``ar_bench_memory_<pid>`` (``DATABASE_URL`` names the server,
default ``postgres://postgres@127.0.0.1:5432/ar_bench``), stores ``--events`` events (default
10,000) of one active asset, each emitted through one alias and carrying an ``extra`` of about
``--extra-bytes`` bytes of JSON, and starts gunicorn (``devtools.processes``: gthread, one
worker x 8 threads) with production settings (``bench.settings``). After one warm-up request
(``limit=1``) per route it sends ``--clients`` (default 8) concurrent
``GET /execution/asset-events/by-asset?name=…`` without ``limit`` (every event, as the Airflow
client asks), then the same for ``by-asset-alias``, and prints per route:

* ``rss MB``: the worker's resident memory after the warm-up (``VmRSS``);
* ``peak MB``: the worker's peak resident memory (``VmHWM`` of ``/proc/<pid>/status``, the
  high-water mark since the worker started) once the concurrent reads are answered;
* ``growth MB``: peak minus the warm-up's peak: what answering the reads cost in memory;
* ``body MB`` and ``s``: the size of one answer and the slowest answer's time.

Each route gets a fresh server, so that each peak is its own. The database is dropped at the
end, also on Ctrl-C.

Measured with the defaults (10,000 events, ~200-byte extras, 8 concurrent reads), PostgreSQL
15, on the shared 2-core machine (load average 11 to 16: the times mean little). Before, on
caba777 (main: every event of an answer loaded, serialized and rendered at once)::

    route             rss MB  peak MB  growth MB  body MB      s
    by-asset            87.4    563.6      476.3     4.78  26.04
    by-asset-alias      87.2    552.1      464.9     4.78  26.09

After (branch ``hard``: read, rendered and streamed 500 events at a time)::

    route             rss MB  peak MB  growth MB  body MB      s
    by-asset            86.9    156.7       69.8     4.78  27.00
    by-asset-alias      87.0    150.0       63.0     4.78  28.38
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    bench_environment,
    child_pids,
    load_average,
    process_stop,
    scratch_database,
    stop_children,
    stop_on_signals,
)

bench_environment()

import django  # noqa: E402

django.setup()

import httpx  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from django.utils import timezone  # noqa: E402

from assets_app.models import (  # noqa: E402
    Asset,
    AssetActive,
    AssetAlias,
    AssetAliasAssetEvent,
    AssetEvent,
)
from assets_app.services.runs.dag_runs import (  # noqa: E402
    task_instance_create,
    task_instance_token_issue,
)
from devtools.processes import ServerStartError, current_database_url, server_start  # noqa: E402

ASSET = ("bench_memory_asset", "s3://bench/memory")
ALIAS = "bench-memory-alias"
BATCH = 2000


def store_events(count: int, extra_bytes: int) -> None:
    """``count`` events of one active asset, each linked to the alias."""
    asset = Asset.objects.create(name=ASSET[0], uri=ASSET[1])
    AssetActive.objects.create(asset=asset, name=asset.name, uri=asset.uri)
    alias = AssetAlias.objects.create(name=ALIAS)
    padding = "x" * max(0, extra_bytes - 40)
    now = timezone.now()
    for start in range(0, count, BATCH):
        with transaction.atomic():
            events = AssetEvent.objects.bulk_create(
                AssetEvent(
                    asset=asset,
                    extra={"n": n, "note": padding},
                    source_dag_id="bench_memory",
                    source_task_id="produce",
                    source_run_id=f"run_{n}",
                    timestamp=now,
                )
                for n in range(start, min(count, start + BATCH))
            )
            AssetAliasAssetEvent.objects.bulk_create(
                AssetAliasAssetEvent(alias=alias, event=event) for event in events
            )


def memory_mb(pid: int) -> tuple[float, float]:
    """(``VmRSS``, ``VmHWM``) of a process, in MB."""
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(value.split()[0]) / 1024
    return values["VmRSS"], values["VmHWM"]


def read(url: str, token: str) -> tuple[int, float]:
    start = time.monotonic()
    with httpx.Client(timeout=600, headers={"Authorization": f"Bearer {token}"}) as client:
        response = client.get(url)
    response.raise_for_status()
    return len(response.content), time.monotonic() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000, help="events stored")
    parser.add_argument("--extra-bytes", type=int, default=200, help="bytes of each extra")
    parser.add_argument("--clients", type=int, default=8, help="concurrent reads")
    parser.add_argument("--threads", type=int, default=8, help="threads of the worker")
    args = parser.parse_args()

    logging.getLogger().setLevel(logging.WARNING)  # this process only
    stop_on_signals()
    logs = Path(tempfile.mkdtemp(prefix="ar-bench-memory-"))
    try:
        with scratch_database("memory"):
            process = None
            try:
                store_events(args.events, args.extra_bytes)
                ti = task_instance_create(dag_id="bench_memory", task_id="read", run_id="r")
                token = task_instance_token_issue(
                    task_instance_id=ti.task_instance.pk, ttl_seconds=3600
                )
                env = dict(os.environ, DATABASE_URL=current_database_url())
                print(
                    f"{connection.vendor}, gunicorn gthread 1 worker x {args.threads} threads, "
                    f"{args.events:,} events with ~{args.extra_bytes}-byte extras, "
                    f"{args.clients} concurrent reads of all of them; {load_average()}"
                )
                print(
                    f"{'route':<16} {'rss MB':>7} {'peak MB':>8} {'growth MB':>10} "
                    f"{'body MB':>8} {'s':>6}"
                )
                routes = {
                    "by-asset": f"by-asset?name={ASSET[0]}",
                    "by-asset-alias": f"by-asset-alias?name={ALIAS}",
                }
                for route, query in routes.items():  # a fresh server each: its own peak
                    with (logs / "gunicorn.log").open("ab") as log:
                        try:
                            process, url = server_start(
                                env=env, stdout=log, workers=1, threads=args.threads
                            )
                        except ServerStartError as exc:
                            raise SystemExit(f"{exc}, see {logs / 'gunicorn.log'}") from exc
                    [worker] = child_pids(process.pid)
                    events_url = f"{url}/execution/asset-events/{query}"
                    read(f"{events_url}&limit=1", token)  # warm-up
                    rss, warm_peak = memory_mb(worker)
                    with ThreadPoolExecutor(args.clients) as pool:
                        replies = list(
                            pool.map(read, [events_url] * args.clients, [token] * args.clients)
                        )
                    _, peak = memory_mb(worker)
                    process_stop(process)
                    process = None
                    size = replies[0][0]
                    slowest = max(seconds for _, seconds in replies)
                    print(
                        f"{route:<16} {rss:>7.1f} {peak:>8.1f} {peak - warm_peak:>10.1f} "
                        f"{size / 1e6:>8.2f} {slowest:>6.2f}"
                    )
            finally:
                if process is not None:
                    process_stop(process)
                stop_children()
    except KeyboardInterrupt:
        print("\ninterrupted; cleaned up", file=sys.stderr)
        raise SystemExit(130) from None
    finally:
        shutil.rmtree(logs, ignore_errors=True)


if __name__ == "__main__":
    main()
