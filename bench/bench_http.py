"""Benchmark the execution API's success PATCH through a real gunicorn: cost per request.

Usage (from the repository root)::

    .venv/bin/python bench/bench_http.py                     # PostgreSQL on 127.0.0.1, defaults
    .venv/bin/python bench/bench_http.py --scenarios floor,asset --requests 1000
    .venv/bin/python bench/bench_http.py --workers 2 --clients 16
    .venv/bin/python bench/bench_http.py --requests 40 \\
        --check-statements-log /var/log/postgresql/postgresql-15-main.log
    DATABASE_URL=sqlite:///x .venv/bin/python bench/bench_http.py    # SQLite (no statement count)

It creates a scratch database ``ar_bench_http_<pid>`` (``DATABASE_URL`` names the server,
default ``postgres://postgres@127.0.0.1:5432/ar_bench``), migrates it, declares the seed's
example DAGs plus the benchmark's, and starts gunicorn (``devtools.processes``; gthread,
``--workers`` processes x ``--threads`` threads, default one worker x 8) with production
settings (``bench.settings``: DEBUG off, INFO logging, persistent connections with health
checks) plus statement counting. Then, per scenario, it creates one running task instance per
request, runs ``ANALYZE`` (what autovacuum would have done on a live system) and sends their
success ``PATCH /execution/task-instances/{id}/state`` bodies, in the real task SDK's wire
format, from ``--clients`` concurrent keep-alive HTTP clients: first ``--warmup`` requests,
then the measured ``--requests``. The database is dropped at the end, also on Ctrl-C.

Scenarios (``--scenarios``, default all but ``alias-shared``):

* ``floor``        success of a task with no outlets (the stack's floor);
* ``asset``        the seed's producer: one declared asset, one event, its consumer queued;
* ``assets10``     ten declared assets, one event each, one consumer DAG per asset queued;
* ``alias10``      ten alias events through one declared alias to ten new assets (assets,
                   alias links, events, event links and the alias consumer's queue rows);
* ``alias1000``    the same with 1,000 new assets, ``--large-requests`` requests after
                   ``--large-warmup`` (default 30 after 3);
* ``alias-shared`` every request emits through the seed's alias to the same asset (the
                   contended case).

Printed per scenario, over the measured requests only:

* ``req/s`` and latency percentiles (``p50``/``p95``/``p99``, nearest rank) seen by the
  clients, which run in this process and take CPU from the same two cores;
* ``srv ms``: CPU time of the gunicorn worker process(es) (``/proc/<pid>/stat`` utime +
  stime, all threads, 10 ms ticks) read after the warm-up and after the last measured
  response, divided by the number of requests. The master is not included (it only
  supervises);
* ``pg ms``: the same for the PostgreSQL backends serving the worker's connections (their
  pids come back in ``X-Bench-Db-Pid``; needs the server on this machine);
* ``stmts``: statements per request as PostgreSQL receives them, from the counting backend
  (``bench.counting_backend``) via the ``X-Bench-Statements`` response header: every
  statement, psycopg's implicit ``BEGIN``, ``COMMIT``, and Django's connection health check
  (``SELECT 1`` at the first query of each request, ``CONN_HEALTH_CHECKS``). The mean, with
  min-max when they differ (a request that opens a new connection also sends its set-up);
* ``events``: asset events created per request (a check that the scenario did its work).

The statement counter was checked against PostgreSQL's own log: with
``--check-statements-log FILE`` the scratch database gets ``log_statement = all`` before the
server starts, and at the end the lines ``LOG:  statement:``/``LOG:  execute`` that
PostgreSQL wrote for the server's backend pids are counted and compared with the sum of the
headers over every request (warm-up included). On 6d9d746 with ``--requests 40 --warmup 10
--large-requests 4 --large-warmup 1``: 2,265 statements counted, 2,265 logged (of them 205
``BEGIN``, 205 ``COMMIT`` and 197 ``SELECT 1``: the 8 requests that opened a thread's
connection had no health check). Timings of a checked run mean nothing (logging every
statement is slow).

Measured on 2026-12-01, PostgreSQL 15, the defaults, on this 2-core machine with no other
session running: ecd97a1 (before: lock, update, settle in the transaction; 8 registration
statements always) and this tree (after: one finishing ``UPDATE … RETURNING``, the settle
after the commit, registration statements only with rows, PostgreSQL's independent writes
as one, payload serializers' fields built once), three runs of each, alternating, load
average 2 to 3.7 (the benchmark itself). Server CPU per request, min-max of the three::

    scenario      before: srv ms  stmts    after: srv ms  stmts
    floor           5.1-6.3         6        2.4-2.9        3
    asset          11.5-12.1       14        4.8-5.4        8
    assets10       11.6-12.1       14        5.2-6.0        8
    alias10         9.8-11.1       14        5.5-6.6       10

The machine's speed drifts: at the session's start (load 0.6-1.3) the same code measured
3.1 / 7.2 ms (before) and 2.0-2.2 / 3.6-4.3 ms (after) for floor / asset. The ratio, about
2.2x less server CPU, held in every pair. alias1000: 10 statements, 132-170 ms server CPU
(before: 14, 142-180 ms).

Measured on 2026-12-03, the defaults, ``--scenarios floor,asset,alias1000 --large-requests 45
--large-warmup 5``, three pairs alternating 1e0faf8 (before) and fc2e90c (after: the loaded
server frozen out of the garbage collector's sight, ``config/startup.py``; the registration's
Python leaner for 1,000 alias events; the alias link tables without their index by alias).
Server / PostgreSQL CPU per request, the three pairs::

    scenario      before: srv ms       pg ms          after: srv ms      pg ms
    floor         5.0 4.1 4.4          1.2 0.9 1.0    4.1 4.4 4.4        0.9 0.9 1.0
    asset         7.2 5.1 6.5          3.1 1.9 2.4    5.4 6.4 7.3        2.1 2.3 2.7
    alias1000     199 162 182          188 166 165    103  88 119        162 144 183

alias1000's server CPU fell by 35-48 % in every pair; its PostgreSQL CPU moved within the
noise (a third of it is the commit's 6,000 deferred foreign-key checks of the link and queue
rows). floor and asset did not move beyond the host's drift.

Later the same day, the host fast, four pairs, 1e0faf8 against d8ae1b8 (srv / pg ms, p99 ms)::

    scenario      before: srv ms            pg ms          after: srv ms         pg ms
    floor         2.7 3.1 3.2 2.3           0.5-0.6        2.2 2.2 2.4 2.6       0.5-0.7
    asset         4.1 5.0 4.1 3.9           1.4-1.8        4.0 3.7 3.9 4.6       1.4-1.7
    alias1000     103 115 107 104           102-120        57 54 57 62           99-106

floor's p99 latency went from 83-121 ms to 40-45 ms: the full collections the frozen objects
no longer take part in were its slowest requests.

On 2026-12-03 evening, the host slow (floor 2.3-3.6 ms), six pairs, b712c3b (before) against
138a838 (after: two foreign-key checks per alias event fewer, and new alias targets returned
by their INSERT instead of read back: 7 statements instead of 8)::

    scenario    per request    before, pair 1 to 6          after, pair 1 to 6
    asset       srv ms         4.4 4.7 4.9 3.7 5.2 5.1      4.8 3.7 4.4 4.9 5.3 5.6
    asset       pg ms          1.7-2.2                      1.8-2.3
    alias1000   srv ms         74 70 88 72 78 68            73 67 62 64 65 80
    alias1000   pg ms          119 114 130 116 123 107      96 96 89 97 96 109

alias1000's PostgreSQL CPU fell in five pairs of six (median 118 -> 96 ms); asset did not move
beyond the host's drift. Six more pairs on 860011d, the host faster (floor 2.0-3.1 ms):
alias1000's PostgreSQL CPU 130 87 83 92 99 88 -> 88 77 96 95 80 81 ms, server CPU
83 49 47 67 71 66 -> 57 53 68 74 58 60 ms; in the two pairs where the host was fastest
(floor 2.0-2.1 ms after), 88 and 77 ms.

On 2026-12-04, the host fast, against 52a55eb (the commit before the run-lifecycle and hardening
work the issue measured the regression from; the old server served by this file and its
helpers copied into a worktree of it, with the venv's editable install of the current tree
kept out of its imports), ``--scenarios floor,asset,alias1000 --large-requests 45
--large-warmup 5``, eight pairs alternated, c98a080 the "after" (srv / pg ms per request)::

    scenario   stmts    52a55eb: srv ms    pg ms          c98a080: srv ms   pg ms
    floor      5 -> 2   4.0-5.2            0.8-1.1        1.8-2.8           0.5-0.8
    asset     13 -> 6   7.4-9.4            3.5-4.3        3.2-4.4           1.2-1.7
    alias1000 13 -> 7   124 125 131 103    106 104 104 90 54 42 45 62       70 63 66 84
                        97 116 98 103      85 91 87 90    51 48 56 45       67 67 74 65

and four more pairs later against 53cf82e: alias1000 srv 98 126 101 88 -> 60 41 49 47 ms,
pg 84 110 91 79 -> 71 58 60 63 ms. With the default scenarios (alias1000 after alias10's 3,000
new assets), three pairs: alias1000 pg 150 136 127 -> 85 93 81 ms, alias10 pg 8.7 8.2 8.7 ->
4.6 4.3 4.6 ms, assets10 pg 4.4 4.2 4.7 -> 2.0 1.8 1.7 ms.

Then, six pairs, c98a080 against 53cf82e (the links and queue rows of the alias targets a
request has just created inserted without a conflict check), ``--scenarios
floor,asset,alias10,alias1000``, the host fast and steady (floor 1.6-2.4 ms)::

    scenario    per request   c98a080, pair 1 to 6           53cf82e, pair 1 to 6
    alias1000   pg ms         73.3 70.0 66.7 72.9 66.4 71.3  64.7 66.2 63.8 65.6 66.2 64.9
    alias1000   srv ms        42.9 42.7 40.9 47.8 38.4 48.9  38.9 38.4 42.4 41.1 45.6 45.8
    alias10     pg ms         3.9 3.4 3.2 3.7 3.4 4.0        3.3 3.3 3.4 3.3 3.4 3.7
    asset       pg ms         1.1-1.3                        1.0-1.6

alias1000's PostgreSQL CPU fell in all six pairs (median 70.7 -> 65.3 ms); the rest moved within
the noise. Earlier pairs of the same change with the host drifting were inconclusive. In one
process, the old and the new registration alternating call by call in random order (a
throwaway harness around ``bench_registration``'s scenarios; PostgreSQL backend CPU of each
committed call, 30 calls each), alias events to 1,000 new assets cost 73.6 -> 68.8 ms, the
calls whose SQL did not change (declared assets, existing targets) the same within 2 ms.

The second run of a pair pays more: with the default scenarios, nine pairs of the same two
commits gave alias1000 pg 79.8 86.0 76.4 85.1 87.1 88.0 -> 93.8 78.2 90.9 86.4 90.7 93.8 ms
with c98a080 run first in each pair (after worse in 5 of 6), and 89.6 87.8 83.8 -> 84.9 76.0
78.4 ms with 53cf82e run first (after better in 3 of 3); the server's CPU, which the change does
not touch, moved the same way. Alternate the order of the two trees between pairs, as the
numbers of a pair depend on which runs second by about as much as a small change does.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    REPO,
    bench_environment,
    check_statements_log,
    child_pids,
    cpu_seconds,
    cpu_spent,
    load_average,
    log_every_statement,
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
import yaml  # noqa: E402
from django.db import connection  # noqa: E402

from assets_app.models import AssetEvent  # noqa: E402
from assets_app.services.dags.declare import dags_declare  # noqa: E402
from assets_app.services.dags.manifest import manifest_parse  # noqa: E402
from assets_app.services.runs.dag_runs import (  # noqa: E402
    task_instance_create,
    task_instance_token_issue,
)
from devtools.processes import ServerStartError, current_database_url, server_start  # noqa: E402

END = "2026-11-30T04:50:58.540508Z"
SEED_ASSET = "s3://bucket/my-task"
SEED_ALIAS = "example-alias"
ALIAS = "bench-alias"
TEN = [(f"bench_ten_{k}", f"s3://bench/ten/{k}") for k in range(10)]
HEADERS = {
    "airflow-api-version": "2026-06-30",
    "user-agent": "apache-airflow-task-sdk/1.3.2 (Python/3.11.7) bench_http",
}

BENCH_DAGS = [
    {"dag_id": "bench_floor", "tasks": [{"task_id": "succeed"}]},
    {
        "dag_id": "bench_ten_producer",
        "tasks": [
            {
                "task_id": "produce",
                "outlets": [{"asset": {"name": name, "uri": uri}} for name, uri in TEN],
            }
        ],
    },
    *(
        {
            "dag_id": f"bench_ten_consumer_{k}",
            "schedule": {"asset": {"name": name, "uri": uri}},
            "tasks": [{"task_id": "consume"}],
        }
        for k, (name, uri) in enumerate(TEN)
    ),
    {
        "dag_id": "bench_alias_producer",
        "tasks": [{"task_id": "produce", "outlets": [{"alias": ALIAS}]}],
    },
    {
        "dag_id": "bench_alias_consumer",
        "schedule": {"alias": ALIAS},
        "tasks": [{"task_id": "consume"}],
    },
]


def _asset_outlet(name: str, uri: str) -> dict:
    return {"name": name, "uri": uri, "type": "Asset"}


def _asset_event(name: str, uri: str, n: int) -> dict:
    return {"dest_asset_key": {"name": name, "uri": uri}, "extra": {"n": n}}


def _alias_body(alias: str, targets: list[tuple[str, str]], n: int) -> dict:
    return {
        "task_outlets": [{"name": alias, "uri": None, "type": "AssetAlias"}],
        "outlet_events": [
            {
                "source_alias_name": alias,
                "dest_asset_key": {"name": name, "uri": uri},
                "dest_asset_extra": {},
                "extra": {"n": n},
            }
            for name, uri in targets
        ],
    }


def _dynamic(size: int) -> Callable[[int], dict]:
    def body(n: int) -> dict:
        targets = [
            (f"bench_dyn{size}_{n}_{k}", f"s3://bench/dyn{size}/{n}/{k}") for k in range(size)
        ]
        return _alias_body(ALIAS, targets, n)

    return body


@dataclass(frozen=True)
class Scenario:
    name: str
    dag_id: str
    task_id: str
    body: Callable[[int], dict]  # the outlet part of the body of request n
    events_per_request: int
    large: bool = False


SCENARIOS = {
    s.name: s
    for s in (
        Scenario(
            "floor",
            "bench_floor",
            "succeed",
            lambda n: {"task_outlets": [], "outlet_events": []},
            0,
        ),
        Scenario(
            "asset",
            "asset_s3_bucket_producer",
            "produce_asset_events",
            lambda n: {
                "task_outlets": [_asset_outlet(SEED_ASSET, SEED_ASSET)],
                "outlet_events": [_asset_event(SEED_ASSET, SEED_ASSET, n)],
            },
            1,
        ),
        Scenario(
            "assets10",
            "bench_ten_producer",
            "produce",
            lambda n: {
                "task_outlets": [_asset_outlet(name, uri) for name, uri in TEN],
                "outlet_events": [_asset_event(name, uri, n) for name, uri in TEN],
            },
            10,
        ),
        Scenario("alias10", "bench_alias_producer", "produce", _dynamic(10), 10),
        Scenario("alias1000", "bench_alias_producer", "produce", _dynamic(1000), 1000, large=True),
        Scenario(
            "alias-shared",
            "asset_alias_example_alias_producer",
            "produce_asset_events_through_asset_alias",
            lambda n: _alias_body(SEED_ALIAS, [(SEED_ASSET, SEED_ASSET)], n),
            1,
        ),
    )
}
DEFAULT_SCENARIOS = "floor,asset,assets10,alias10,alias1000"


@dataclass
class Reply:
    status: int
    seconds: float
    statements: int | None
    db_pid: int | None


@dataclass
class Totals:
    """Over every request sent (warm-up included), for --check-statements-log."""

    statements: int = 0
    db_pids: set[int] = field(default_factory=set)

    def add(self, replies: list[Reply]) -> None:
        for reply in replies:
            self.statements += reply.statements or 0
            if reply.db_pid is not None:
                self.db_pids.add(reply.db_pid)


def declare() -> None:
    seed = yaml.safe_load((REPO / "examples" / "dags.yaml").read_text())
    manifest = manifest_parse({"dags": [*seed["dags"], *BENCH_DAGS]}, source="bench_http")
    dags_declare(manifest=manifest, fileloc="bench_http")


def prepare(scenario: Scenario, count: int) -> list[tuple[str, str, int]]:
    """``count`` running task instances of the scenario's task: (id, token, n)."""
    tasks = []
    for n in range(count):
        ti = task_instance_create(
            dag_id=scenario.dag_id,
            task_id=scenario.task_id,
            run_id=f"bench_{scenario.name}_{n}",
            state="running",
        ).task_instance
        tasks.append((str(ti.pk), task_instance_token_issue(task_instance_id=ti.pk), n))
    return tasks


def analyze() -> None:
    """Refresh the planner's statistics, as autovacuum would on a live system: the earlier
    scenarios filled the tables fast, and with stale statistics PostgreSQL plans the alias
    scenarios' anti-joins as scans of the whole ``asset`` table (alias1000 then measured
    twice its cost, depending on autovacuum's timing)."""
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")


def send_all(
    http: httpx.Client,
    pool: ThreadPoolExecutor,
    url: str,
    scenario: Scenario,
    tasks: list[tuple[str, str, int]],
) -> list[Reply]:
    def send(task: tuple[str, str, int]) -> Reply:
        ti_id, token, n = task
        body = {
            "state": "success",
            "end_date": END,
            **scenario.body(n),
            "rendered_map_index": None,
        }
        headers = {
            **HEADERS,
            "authorization": f"Bearer {token}",
            "correlation-id": str(uuid.uuid4()),
        }
        started = time.perf_counter()
        response = http.patch(
            f"{url}/execution/task-instances/{ti_id}/state", json=body, headers=headers
        )
        seconds = time.perf_counter() - started
        statements = response.headers.get("x-bench-statements")
        db_pid = response.headers.get("x-bench-db-pid")
        return Reply(
            status=response.status_code,
            seconds=seconds,
            statements=int(statements) if statements is not None else None,
            db_pid=int(db_pid) if db_pid is not None else None,
        )

    return list(pool.map(send, tasks))


def run_scenario(
    *,
    http: httpx.Client,
    pool: ThreadPoolExecutor,
    url: str,
    master_pid: int,
    scenario: Scenario,
    warmup: int,
    requests: int,
    totals: Totals,
) -> None:
    tasks = prepare(scenario, warmup + requests)
    analyze()
    warm = send_all(http, pool, url, scenario, tasks[:warmup])
    db_pids = {r.db_pid for r in warm if r.db_pid is not None}
    workers = child_pids(master_pid)
    events_before = AssetEvent.objects.count()

    server_before, db_before = cpu_seconds(workers), cpu_seconds(sorted(db_pids))
    started = time.perf_counter()
    replies = send_all(http, pool, url, scenario, tasks[warmup:])
    elapsed = time.perf_counter() - started
    db_pids |= {r.db_pid for r in replies if r.db_pid is not None}
    server_cpu = cpu_spent(server_before, cpu_seconds(workers))
    db_after = cpu_seconds(sorted(db_pids))
    db_cpu = cpu_spent(db_before, db_after) if db_after else None
    totals.add(warm + replies)

    events = AssetEvent.objects.count() - events_before
    latencies = [r.seconds * 1000 for r in replies]
    bad = [r.status for r in [*warm, *replies] if r.status != 204]
    counts = [r.statements for r in replies if r.statements is not None]
    if counts:
        mean = statistics.fmean(counts)
        stmts = (
            f"{mean:.0f}"
            if min(counts) == max(counts)
            else f"{mean:.2f} ({min(counts)}-{max(counts)})"
        )
    else:
        stmts = "n/a"
    db_ms = f"{db_cpu * 1000 / requests:6.1f}" if db_cpu is not None else "   n/a"
    print(
        f"{scenario.name:<14} {requests:>5} {requests / elapsed:>7.1f} "
        f"{percentile(latencies, 50):>7.1f} {percentile(latencies, 95):>7.1f} "
        f"{percentile(latencies, 99):>7.1f} {server_cpu * 1000 / requests:>7.1f} {db_ms} "
        f"{stmts:>6} {events / requests:>7.0f}"
        + (f"  {len(bad)} not 204: {sorted(set(bad))}" if bad else ""),
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--scenarios", default=DEFAULT_SCENARIOS, help=f"from {', '.join(SCENARIOS)}"
    )
    parser.add_argument("--requests", type=int, default=300, help="measured requests per scenario")
    parser.add_argument("--warmup", type=int, default=20, help="warm-up requests per scenario")
    parser.add_argument("--large-requests", type=int, default=30, help="measured, alias1000")
    parser.add_argument("--large-warmup", type=int, default=3, help="warm-up, alias1000")
    parser.add_argument("--clients", type=int, default=8, help="concurrent keep-alive clients")
    parser.add_argument("--workers", type=int, default=1, help="gunicorn worker processes")
    parser.add_argument("--threads", type=int, default=8, help="threads per worker")
    parser.add_argument(
        "--check-statements-log",
        type=Path,
        metavar="FILE",
        help="PostgreSQL's log file: log every statement and compare with the counts",
    )
    args = parser.parse_args()
    scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    unknown = [s for s in scenarios if s not in SCENARIOS]
    if unknown:
        parser.error(
            f"unknown scenario(s) {', '.join(unknown)}; choose from {', '.join(SCENARIOS)}"
        )
    if args.check_statements_log and not args.check_statements_log.is_file():
        parser.error(f"--check-statements-log: {args.check_statements_log} is not a readable file")

    logging.getLogger().setLevel(logging.WARNING)  # this process only; the server logs INFO
    stop_on_signals()
    logs = Path(tempfile.mkdtemp(prefix="ar-bench-http-"))
    failed = True
    try:
        with scratch_database("http") as database:
            process = None
            try:
                declare()
                if args.check_statements_log:
                    log_every_statement(database)
                # gunicorn closes a keep-alive connection idle for 2 s by default; between
                # scenarios (and around alias1000's long requests) the clients' connections
                # idle longer, and a request sent as the server closes one fails ("Server
                # disconnected"). A proxy in front keeps connections open the same way.
                env = dict(
                    os.environ,
                    DATABASE_URL=current_database_url(),
                    GUNICORN_CMD_ARGS="--keep-alive 75",
                )
                with (logs / "gunicorn.log").open("wb") as log:
                    try:
                        process, url = server_start(
                            env=env, stdout=log, workers=args.workers, threads=args.threads
                        )
                    except ServerStartError as exc:
                        raise SystemExit(f"{exc}, see {logs / 'gunicorn.log'}") from exc
                offset = (
                    args.check_statements_log.stat().st_size if args.check_statements_log else 0
                )
                print(
                    f"{connection.vendor}, gunicorn gthread {args.workers} worker(s) x "
                    f"{args.threads} threads, {args.clients} keep-alive clients, production "
                    f"settings; {load_average()}"
                )
                totals = run_all(args, scenarios, url, process.pid)
                if args.check_statements_log:
                    check_statements_log(
                        args.check_statements_log,
                        offset=offset,
                        database=database,
                        pids=totals.db_pids,
                        counted=totals.statements,
                    )
                failed = False
            finally:
                if process is not None:
                    process_stop(process)
                stop_children()
    except KeyboardInterrupt:
        print("\ninterrupted; cleaned up", file=sys.stderr)
        shutil.rmtree(logs, ignore_errors=True)
        raise SystemExit(130) from None
    finally:
        if failed and logs.exists():
            print(f"server log kept in {logs}", file=sys.stderr)
        else:
            shutil.rmtree(logs, ignore_errors=True)


def run_all(args: argparse.Namespace, scenarios: list[str], url: str, master_pid: int) -> Totals:
    print(
        f"{'scenario':<14} {'reqs':>5} {'req/s':>7} {'p50 ms':>7} {'p95 ms':>7} "
        f"{'p99 ms':>7} {'srv ms':>7} {'pg ms':>6} {'stmts':>6} {'events':>7}"
    )
    totals = Totals()
    limits = httpx.Limits(max_connections=args.clients, max_keepalive_connections=args.clients)
    with (
        httpx.Client(timeout=120, limits=limits) as http,
        ThreadPoolExecutor(args.clients) as pool,
    ):
        for name in scenarios:
            scenario = SCENARIOS[name]
            run_scenario(
                http=http,
                pool=pool,
                url=url,
                master_pid=master_pid,
                scenario=scenario,
                warmup=args.large_warmup if scenario.large else args.warmup,
                requests=args.large_requests if scenario.large else args.requests,
                totals=totals,
            )
    return totals


if __name__ == "__main__":
    main()
