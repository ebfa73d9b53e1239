"""Benchmark the whole chain: a producer's success → its consumer's task instance starting.

Usage (from the repository root)::

    .venv/bin/python bench/bench_e2e.py                      # 200 events at 5/s
    .venv/bin/python bench/bench_e2e.py --events 50 --rate 2 --interval 1

PostgreSQL only (``DATABASE_URL`` names the server, default
``postgres://postgres@127.0.0.1:5432/ar_bench``); it creates, migrates and drops the scratch
database ``ar_bench_e2e_<pid>``. Everything runs as in production, with the default settings
(``bench.settings``): gunicorn (one gthread worker x 8 threads), one ``manage.py scheduler``
(``--interval``, default 1 s) and one ``manage.py worker`` (``--poll-interval`` 1 s,
``--concurrency``, default 4) against it.

``--events`` producer task instances (DAG ``e2e_producer_<k>``, ``--consumers`` of them,
default 20, each with an outlet asset that one consumer DAG ``e2e_consumer_<k>`` schedules on,
its task ``bench/e2e_tasks.py:consume``) are created running; one client thread sends their
success ``PATCH …/state`` at ``--rate`` per second, round-robin over the producers, and records
the wall clock right after each ``204`` (the producer's transaction has committed). The
latency of an event is then from that response to the ``start_date`` of the consumer task
instance whose run consumed it (set by the task runner's ``/run`` call, on the same clock),
so it spans the notification, the scheduler pass, the worker's claim and the start of the
task's process. Printed: p50, p95, p99 and max; events whose consumer never started within
``--timeout`` are counted as missing.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    REPO,
    bench_environment,
    load_average,
    percentile,
    process_stop,
    scratch_database,
    stop_children,
    stop_on_signals,
)

bench_environment()

import django  # noqa: E402

django.setup()

import httpx  # noqa: E402
from django.db import connection  # noqa: E402

from assets_app.models import AssetEvent, TaskInstance  # noqa: E402
from assets_app.services.dag_runs import (  # noqa: E402
    task_instance_create,
    task_instance_token_issue,
)
from assets_app.services.dags import dags_declare  # noqa: E402
from assets_app.services.manifest import manifest_parse  # noqa: E402
from devtools.processes import ServerStartError, current_database_url, server_start  # noqa: E402

HEADERS = {
    "airflow-api-version": "2026-06-30",
    "user-agent": "apache-airflow-task-sdk/1.3.2 (Python/3.11.7) bench_e2e",
}


def uri(k: int) -> str:
    return f"s3://bench/e2e/{k}"


def declare(consumers: int) -> None:
    dags = []
    for k in range(consumers):
        dags.append(
            {
                "dag_id": f"e2e_producer_{k}",
                "tasks": [{"task_id": "produce", "outlets": [{"asset": {"uri": uri(k)}}]}],
            }
        )
        dags.append(
            {
                "dag_id": f"e2e_consumer_{k}",
                "schedule": {"asset": {"uri": uri(k)}},
                "tasks": [{"task_id": "consume", "callable": f"{REPO}/bench/e2e_tasks.py:consume"}],
            }
        )
    dags_declare(manifest=manifest_parse({"dags": dags}, source="bench_e2e"), fileloc="bench_e2e")


def spawn(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "manage.py", *args],
        cwd=REPO,
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200)
    parser.add_argument("--rate", type=float, default=5.0, help="events per second")
    parser.add_argument("--consumers", type=int, default=20)
    parser.add_argument("--interval", type=float, default=1.0, help="scheduler --interval")
    parser.add_argument("--concurrency", type=int, default=4, help="worker --concurrency")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds to wait at the end")
    args = parser.parse_args()
    if args.events < 1 or args.rate <= 0 or args.consumers < 1:
        parser.error("--events >= 1, --rate > 0, --consumers >= 1 please")
    if connection.vendor != "postgresql":
        raise SystemExit("bench_e2e.py needs PostgreSQL (DATABASE_URL=postgres://...)")
    logging.getLogger().setLevel(logging.WARNING)  # this process only
    stop_on_signals()
    logs = Path(tempfile.mkdtemp(prefix="ar-bench-e2e-"))
    failed = True
    children: list[subprocess.Popen[bytes]] = []
    try:
        with scratch_database("e2e"):
            try:
                declare(args.consumers)
                producers = []
                for n in range(args.events):
                    ti = task_instance_create(
                        dag_id=f"e2e_producer_{n % args.consumers}",
                        task_id="produce",
                        run_id=f"e2e_{n}",
                        state="running",
                    ).task_instance
                    token = task_instance_token_issue(task_instance_id=ti.pk)
                    producers.append((str(ti.pk), token, n % args.consumers))
                env = dict(os.environ, DATABASE_URL=current_database_url())
                with (logs / "gunicorn.log").open("wb") as log:
                    try:
                        server, url = server_start(env=env, stdout=log, workers=1, threads=8)
                    except ServerStartError as exc:
                        raise SystemExit(f"{exc}, see {logs / 'gunicorn.log'}") from exc
                children.append(server)
                children.append(
                    spawn(["scheduler", "--interval", str(args.interval)], logs / "s.log", env)
                )
                children.append(
                    spawn(
                        [
                            *("worker", "--server", url, "--log-dir", str(logs)),
                            *("--concurrency", str(args.concurrency)),
                        ],
                        logs / "w.log",
                        env,
                    )
                )
                time.sleep(3)  # both started and listening
                print(
                    f"{args.events} events at {args.rate:g}/s over {args.consumers} consumer "
                    f"DAGs; scheduler --interval {args.interval:g}; {load_average()}",
                    flush=True,
                )
                responded: dict[int, float] = {}  # event id → wall clock of the 204
                started = time.monotonic()
                with httpx.Client(timeout=60) as http:
                    for n, (ti_id, token, _) in enumerate(producers):
                        due = started + n / args.rate
                        time.sleep(max(0.0, due - time.monotonic()))
                        response = http.patch(
                            f"{url}/execution/task-instances/{ti_id}/state",
                            json={
                                "state": "success",
                                "end_date": datetime.now(UTC).isoformat(),
                                **_outlet(producers[n][2]),
                            },
                            headers={**HEADERS, "authorization": f"Bearer {token}"},
                        )
                        at = time.time()
                        if response.status_code != 204:
                            raise SystemExit(f"success answered {response.status_code}")
                        (event_id,) = AssetEvent.objects.filter(
                            source_run_id=f"e2e_{n}"
                        ).values_list("pk", flat=True)
                        responded[event_id] = at
                latencies = wait_started(responded, timeout=args.timeout)
                missing = len(responded) - len(latencies)
                print(
                    "  success response → consumer task instance started: "
                    + ", ".join(
                        f"{name} {percentile(latencies, q) * 1000:.0f} ms"
                        for name, q in (("p50", 50), ("p95", 95), ("p99", 99))
                    )
                    + f", max {max(latencies) * 1000:.0f} ms ({len(latencies)} events"
                    + (f", {missing} MISSING" if missing else "")
                    + ")",
                    flush=True,
                )
                failed = bool(missing)
            finally:
                for child in reversed(children):
                    process_stop(child)
                stop_children()
    except KeyboardInterrupt:
        print("\ninterrupted; cleaned up", file=sys.stderr)
        raise SystemExit(130) from None
    finally:
        if failed and logs.exists():
            print(f"logs kept in {logs}", file=sys.stderr)
        else:
            shutil.rmtree(logs, ignore_errors=True)


def _outlet(k: int) -> dict:
    return {
        "task_outlets": [{"name": uri(k), "uri": uri(k), "type": "Asset"}],
        "outlet_events": [],
    }


def wait_started(responded: dict[int, float], *, timeout: float) -> list[float]:
    """Per event, its consumer task instance's start minus the producer's response."""
    deadline = time.monotonic() + timeout
    while True:
        started = {
            event_id: start.timestamp()
            for event_id, start in TaskInstance.objects.filter(
                dag_run__event_links__event_id__in=list(responded), start_date__isnull=False
            ).values_list("dag_run__event_links__event_id", "start_date")
        }
        if len(started) == len(responded) or time.monotonic() > deadline:
            return [started[e] - responded[e] for e in responded if e in started]
        time.sleep(0.5)


if __name__ == "__main__":
    main()
