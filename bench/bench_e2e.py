"""Benchmark the whole chain: a producer's success → its consumer's task instance starting.

Usage (from the repository root)::

    .venv/bin/python bench/bench_e2e.py                      # 200 events at 5/s
    .venv/bin/python bench/bench_e2e.py --events 50 --rate 2 --interval 1
    .venv/bin/python bench/bench_e2e.py --chain 10 --runs 10  # the hand-over

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
instance whose run consumed it (sent by the task's supervisor in its ``/run`` call, on the
same clock). Events whose consumer never started within ``--timeout`` are counted as missing.

Printed: per stage on the way, its time after the success response (p50, p95, p99, max over
the events) and the median step from the stage before:

- ``event registered``: ``asset_event.timestamp``, set in the producer's transaction;
- ``run created``: ``dag_run.created_at``, set in the scheduler's pass once it has read the
  queue (the scheduler's wake-up itself is not visible from outside: it prints nothing then);
- ``run committed``: when the scheduler's ``created <dag> <run>`` line, printed after its
  commit, reaches this script (a pipe, a thread: a millisecond or two late);
- ``worker woken``, ``claimed``, ``process forked``: the worker's ``timing`` lines (logged at
  ``DEBUG``, which this script turns on for the worker): its loop resumed (a ``NOTIFY`` on the
  runs channel, a child's exit or the poll interval), ``task_instances_claim`` and the lookup
  of the tasks' code returned, the task's supervisor process started;
- ``task instance started``: ``task_instance.start_date`` (the supervisor's ``/run``).

A step can be negative: the worker wakes on the commit, in parallel with the scheduler's
printing.

``--chain N --runs R`` measures the hand-over instead: a DAG of N tasks in a line (each
``bench/e2e_tasks.py:consume``), triggered R times one after another; per edge, from the
upstream's finishing ``UPDATE`` (``task_instance.updated_at``, just before its commit and its
success response) to the downstream's ``start_date`` (its supervisor's ``/run``). Measured
2026-12-02, ``--chain 10 --runs 10``, load 1.1 (2 CPUs): p50 81 ms, p95 151 ms, p99 187 ms,
max 187 ms over 90 hand-overs (target: p50 < 100, p99 < 500). Without the hand-over (before:
tasks had no order at all) the next task would wait for a scheduler pass, up to its
``--interval`` (1 s); Airflow's own wait is its scheduler loop.

Measured (load average = other sessions on the 2 cores; median run of three, alternating)
-----------------------------------------------------------------------------------------
``--events 40 --rate 1 --consumers 10``, load 2.6 to 4.5. Before: main at ecd97a1, where the
worker starts ``python -m task_sdk run`` as a new interpreter (this file copied there and the
``timing`` line added to its worker); p50/p99 of the three runs 468/993, 474/757, 644/1373 ms.
After: the supervisor forked from the worker (``task_sdk.forking``), which has imported its
modules, built the SSL context and an HTTP client once; p50/p99 51/86, 56/122, 61/100 ms.
The median runs side by side (ms after the success response)::

    stage                    before: p50   p95   p99  step    after: p50   p95   p99  step
    event registered                 -11    -6    -4                  -9    -6    -4
    success response                   0     0     0   +11             0     0     0    +9
    run created                       13    27    45   +13            10    24    34   +10
    run committed                     31    54    67   +16            23    46    54   +12
    worker woken                      31    53    66     0            20    46    54    -1
    claimed                           43    68    79   +12            31    63    68    +8
    process forked                    47    78    80    +3            38    74    84    +5
    task instance started            474   667   757  +414            56   106   122   +19

The new interpreter's ~0.3 s of imports (``httpx`` ~0.15 s) and ~0.1 s more for the SSL
context and the first HTTP client are gone; what is left after the fork (~20 ms) is the
supervisor starting its task process (``python -m task_sdk.runner``, whose own start is not
on this path: ``/run`` is sent while it starts) and copy-on-write page faults.

The defaults (200 events at 5/s, 20 consumers), load 4 to 19 (other sessions' test suites).
Before, the worker cannot keep up (4 slots, each held more than a second by a new
interpreter at that load) and the latency grows with the backlog: p50 46 s, 33 s and 35 s.
After, p50/p95/p99 60/127/152 ms (load 5.5 → 4.3), 54/188/235 (10.6 → 7.1), 90/770/1298
(9.4 → 7.0), 80/1889/2151 (19.4 → 12.2). The middle one::

    stage (ms after the success response)       p50    p95    p99    max   step p50
    event registered                             -9     -5     -4     -4
    success response                              0      0      0      0       +8.7
    run created                                   8     37     79     93       +7.6
    run committed                                18     82    133    180      +10.9
    worker woken                                 16     90    129    181       -2.3
    claimed                                      25    123    173    203       +9.4
    process forked                               31    133    177    250       +4.4
    task instance started                        54    188    235    297      +22.7

At load 9 and more the tail is the worker's 4 slots: every task's own process (a new
interpreter, ~0.2 s of CPU) waits for a core, the slots fill up and a run waits for one
("worker woken" late); the start of the supervisor is not the limit there any more.

Earlier figures, for the record (``--events 40 --rate 1 --consumers 10``): main at 424b6c6,
scheduler and worker polling every second, p50/p95/p99 1385/1934/2039 ms; the perf branch
(both woken by ``NOTIFY``), 293/396/439 ms.
"""

from __future__ import annotations

import argparse
import itertools
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

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

from assets_app.models import AssetEvent, DagRun, TaskInstance  # noqa: E402
from assets_app.services.dags.declare import dags_declare  # noqa: E402
from assets_app.services.dags.manifest import manifest_parse  # noqa: E402
from assets_app.services.runs.dag_runs import (  # noqa: E402
    dag_run_trigger,
    task_instance_create,
    task_instance_token_issue,
)
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


#: ``created <dag_id> <run_id> (…)``: the scheduler's line per run, printed after its commit.
CREATED_LINE = re.compile(r"^created (\S+) (\S+) ")
#: The worker's ``DEBUG`` line per task instance it started (``runtime.worker``).
TIMING_LINE = re.compile(r"timing (\S+) woken=([\d.]+) claimed=([\d.]+) forked=([\d.]+)")


def spawn_scheduler(
    args: list[str], log: Path, env: dict[str, str], committed: dict[tuple[str, str], float]
) -> subprocess.Popen[bytes]:
    """The scheduler, its output copied to ``log`` by a thread that notes when each run's
    ``created`` line arrives (``committed[(dag_id, run_id)]``, wall clock)."""
    process = subprocess.Popen(
        [sys.executable, "manage.py", *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )

    def copy(stream: IO[bytes]) -> None:
        with log.open("wb") as out:
            for raw in iter(stream.readline, b""):
                at = time.time()
                out.write(raw)
                if match := CREATED_LINE.match(raw.decode(errors="replace")):
                    committed[(match[1], match[2])] = at

    assert process.stdout is not None  # noqa: S101 - PIPE above; narrows the type
    threading.Thread(target=copy, args=(process.stdout,), daemon=True).start()
    return process


def worker_timings(log: Path) -> dict[str, tuple[float, float, float]]:
    """Task instance id → (woken, claimed, forked), wall clock, from the worker's log."""
    return {
        match[1]: (float(match[2]), float(match[3]), float(match[4]))
        for match in TIMING_LINE.finditer(log.read_text(errors="replace"))
    }


def start_services(
    args: argparse.Namespace, logs: Path, children: list[subprocess.Popen[bytes]]
) -> tuple[str, dict[tuple[str, str], float]]:
    """Start gunicorn, one scheduler and one worker on the scratch database (appended to
    ``children``); the server's URL and the scheduler's ``created`` lines' arrival times."""
    env = dict(os.environ, DATABASE_URL=current_database_url())
    with (logs / "gunicorn.log").open("wb") as log:
        try:
            server, url = server_start(env=env, stdout=log, workers=1, threads=8)
        except ServerStartError as exc:
            raise SystemExit(f"{exc}, see {logs / 'gunicorn.log'}") from exc
    children.append(server)
    committed: dict[tuple[str, str], float] = {}
    children.append(
        spawn_scheduler(
            ["scheduler", "--interval", str(args.interval)], logs / "s.log", env, committed
        )
    )
    children.append(
        spawn(
            [
                *("worker", "--server", url, "--log-dir", str(logs)),
                *("--concurrency", str(args.concurrency)),
            ],
            logs / "w.log",
            {**env, "DJANGO_LOG_LEVEL": "DEBUG"},  # for its timing lines
        )
    )
    time.sleep(3)  # both started and listening
    return url, committed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200)
    parser.add_argument("--rate", type=float, default=5.0, help="events per second")
    parser.add_argument("--consumers", type=int, default=20)
    parser.add_argument("--interval", type=float, default=1.0, help="scheduler --interval")
    parser.add_argument("--concurrency", type=int, default=4, help="worker --concurrency")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds to wait at the end")
    parser.add_argument(
        "--chain",
        type=int,
        default=0,
        help="instead: the hand-over of a chain of this many tasks, over --runs runs",
    )
    parser.add_argument("--runs", type=int, default=10, help="runs of the --chain DAG")
    args = parser.parse_args()
    if args.chain:
        if args.chain < 2 or args.runs < 1:
            parser.error("--chain >= 2 and --runs >= 1 please")
        chain_main(args)
        return
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
                url, committed = start_services(args, logs, children)
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
                chains = wait_started(responded, timeout=args.timeout)
                missing = len(responded) - len(chains)
                print_breakdown(
                    chains, responded, committed=committed, timings=worker_timings(logs / "w.log")
                )
                print(
                    f"  {len(chains)} events" + (f", {missing} MISSING" if missing else ""),
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


def chain_main(args: argparse.Namespace) -> None:
    """The hand-over: a DAG of ``--chain`` tasks in a line, triggered ``--runs`` times one
    after another; per edge, the downstream's ``start_date`` (its supervisor's ``/run``)
    after the upstream's finishing ``UPDATE`` (its ``updated_at``, server clock, just before
    the commit and so before the success response)."""
    if connection.vendor != "postgresql":
        raise SystemExit("bench_e2e.py needs PostgreSQL (DATABASE_URL=postgres://...)")
    logging.getLogger().setLevel(logging.WARNING)
    stop_on_signals()
    logs = Path(tempfile.mkdtemp(prefix="ar-bench-chain-"))
    children: list[subprocess.Popen[bytes]] = []
    task_ids = [f"t{i:02d}" for i in range(args.chain)]
    consume = f"{REPO}/bench/e2e_tasks.py:consume"
    failed = True
    try:
        with scratch_database("chain"):
            try:
                dags_declare(
                    manifest=manifest_parse(
                        {
                            "dags": [
                                {
                                    "dag_id": "e2e_chain",
                                    "tasks": [
                                        {
                                            "task_id": task_id,
                                            "callable": consume,
                                            "upstream": task_ids[i - 1 : i],
                                        }
                                        for i, task_id in enumerate(task_ids)
                                    ],
                                }
                            ]
                        },
                        source="bench_e2e",
                    ),
                    fileloc="bench_e2e",
                )
                start_services(args, logs, children)
                print(
                    f"hand-over: {args.runs} run(s) of a {args.chain}-task chain, one after "
                    f"another; worker --concurrency {args.concurrency}; {load_average()}",
                    flush=True,
                )
                handovers: list[float] = []
                for n in range(args.runs):
                    run = dag_run_trigger(dag_id="e2e_chain", run_id=f"chain_{n}")
                    deadline = time.monotonic() + args.timeout
                    while DagRun.objects.get(pk=run.pk).state not in ("success", "failed"):
                        if time.monotonic() > deadline:
                            raise SystemExit(f"run chain_{n} did not finish in {args.timeout} s")
                        time.sleep(0.1)
                    rows = {
                        task_id: (updated, started)
                        for task_id, updated, started in TaskInstance.objects.filter(
                            dag_run=run
                        ).values_list("task_id", "updated_at", "start_date")
                    }
                    handovers += [
                        (rows[down][1] - rows[up][0]).total_seconds()
                        for up, down in itertools.pairwise(task_ids)
                    ]
                print(
                    f"  upstream finished → downstream started, over {len(handovers)} "
                    "hand-overs (ms): "
                    + "  ".join(f"p{q} {percentile(handovers, q) * 1000:.0f}" for q in (50, 95, 99))
                    + f"  max {max(handovers) * 1000:.0f}",
                    flush=True,
                )
                failed = False
            finally:
                for child in reversed(children):
                    process_stop(child)
                stop_children()
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


@dataclass(frozen=True)
class Chain:
    """What the database says about one event on its way to its consumer's task."""

    registered: float  # asset_event.timestamp, in the producer's transaction
    dag_id: str
    run_id: str
    run_created: float  # dag_run.created_at, in the scheduler's transaction
    ti_id: str
    started: float  # task_instance.start_date, sent by the supervisor's /run


def wait_started(responded: dict[int, float], *, timeout: float) -> dict[int, Chain]:
    """Per event, its consumer's run and task instance once that one started (the events
    whose consumer did not start within ``timeout`` are left out)."""
    deadline = time.monotonic() + timeout
    while True:
        found = {
            event_id: Chain(
                registered.timestamp(),
                dag_id,
                run_id,
                created.timestamp(),
                str(ti_id),
                start.timestamp(),
            )
            for event_id, registered, dag_id, run_id, created, ti_id, start in (
                TaskInstance.objects.filter(
                    dag_run__event_links__event_id__in=list(responded), start_date__isnull=False
                ).values_list(
                    "dag_run__event_links__event_id",
                    "dag_run__event_links__event__timestamp",
                    "dag_id",
                    "run_id",
                    "dag_run__created_at",
                    "pk",
                    "start_date",
                )
            )
        }
        if len(found) == len(responded) or time.monotonic() > deadline:
            return found
        time.sleep(0.5)


#: The stages of the breakdown, in order: name, where its time comes from.
STAGES = (
    ("event registered", "asset_event.timestamp, in the producer's transaction"),
    ("success response", "the 204 of the producer's PATCH …/state (after its commit)"),
    ("run created", "dag_run.created_at, in the scheduler's pass (before its commit)"),
    ("run committed", "the scheduler's 'created' line, read by this benchmark"),
    ("worker woken", "the worker's loop resumed (NOTIFY on the runs channel)"),
    ("claimed", "task_instances_claim + the DagTask lookup returned"),
    ("process forked", "the task_sdk supervisor's process started"),
    ("task instance started", "task_instance.start_date: the supervisor's /run call"),
)


def print_breakdown(
    chains: dict[int, Chain],
    responded: dict[int, float],
    *,
    committed: dict[tuple[str, str], float],
    timings: dict[str, tuple[float, float, float]],
) -> None:
    """Per stage, its time after the producer's response (p50/p95/p99/max over the events
    where it is known), and the median step from the stage before."""
    rows: dict[str, list[float]] = {name: [] for name, _ in STAGES}
    steps: dict[str, list[float]] = {name: [] for name, _ in STAGES}
    for event_id, chain in chains.items():
        woken, claimed, forked = timings.get(chain.ti_id, (None, None, None))
        at = {
            "event registered": chain.registered,
            "success response": responded[event_id],
            "run created": chain.run_created,
            "run committed": committed.get((chain.dag_id, chain.run_id)),
            "worker woken": woken,
            "claimed": claimed,
            "process forked": forked,
            "task instance started": chain.started,
        }
        previous = None
        for name, _ in STAGES:
            when = at[name]
            if when is None:
                continue
            rows[name].append(when - responded[event_id])
            if previous is not None:
                steps[name].append(when - previous)
            previous = when
    print(
        f"  {'stage (ms after the success response)':<40} {'p50':>6} {'p95':>6} {'p99':>6} "
        f"{'max':>6}   {'step p50':>8}",
        flush=True,
    )
    for name, source in STAGES:
        values = rows[name]
        if not values:
            print(f"  {name:<40} (not seen: {source})")
            continue
        figures = (
            " ".join(f"{percentile(values, q) * 1000:6.0f}" for q in (50, 95, 99))
            + f" {max(values) * 1000:6.0f}"
        )
        step = f"{percentile(steps[name], 50) * 1000:+8.1f}" if steps[name] else " " * 8
        print(f"  {name:<40} {figures}   {step}", flush=True)


if __name__ == "__main__":
    main()
