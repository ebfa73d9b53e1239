"""Benchmark running Airflow DAG files: trivial ``@task`` DAGs from trigger to run end, through
gunicorn, ``manage.py scheduler`` and ``manage.py worker``, with the worker's warm parent
(``WORKER_WARM``, :mod:`runtime.warm`) and without it (a new ``airflow_task.py`` per task:
the "before"), alternated.

Usage (from the repository root)::

    .venv/bin/python bench/bench_dag_files.py                    # warm and off, 2 rounds
    .venv/bin/python bench/bench_dag_files.py --modes warm --rounds 1 --runs 3
    .venv/bin/python bench/bench_dag_files.py --modes off        # the before only
    .venv/bin/python bench/bench_dag_files.py --executor celery  # local warm against Celery
    .venv/bin/python bench/bench_dag_files.py --executor celery --modes celery \
        --celery-workers 2 --shapes fanout1000 --runs-fanout1000 1   # 1,000 over 2 workers

``--executor celery`` adds the mode ``celery`` (default modes: ``warm,celery``): the scheduler
runs with ``EXECUTOR=celery`` (``--broker``, default Redis on this machine) and
``--celery-workers`` ``manage.py celery_worker`` processes (``--concurrency`` each, warm, an
environment holding no database URL nor secret) run the tasks. The scheduler is started
anew for each mode, with the mode's executor.

PostgreSQL only (``DATABASE_URL`` names the server, default
``postgres://postgres@127.0.0.1:5432/ar_bench``); it creates, migrates and drops
``ar_bench_dagfiles_<pid>``. gunicorn (one gthread worker x 8 threads) and one scheduler
(``--interval`` 1 s) run throughout; per round and mode one ``manage.py worker``
(``--concurrency``, default 10) is started with ``WORKER_WARM`` on or off, runs one warm-up
run of ``chain10``, then ``--runs`` runs of each shape one after another, and is stopped.

The DAG files (written to a scratch folder, loaded with ``declare_dags --dags-folder``):
``chain10`` (10 trivial ``@task`` in a line), ``fanout10`` (10 in parallel, then a join),
``fanout100`` (100 in parallel, then a join; ``--runs-fanout100``, default 1).

Printed per mode, over its runs:

- ``run``: trigger → run end (the run's ``end_date``), p50 and max, per shape;
- ``hand-over``: downstream ``start_date`` (its supervisor's ``/run``) minus upstream finish
  (``updated_at`` of its success, just before the commit), over every edge (a join: its last
  upstream), p50/p95/p99/max;
- ``CPU/task``: CPU seconds spent from before the first to after the last run of the mode,
  divided by the task instances run, for every process (gunicorn master and workers, the
  scheduler, the worker tree, the PostgreSQL backends connected to the scratch database) and
  for the worker tree alone (the worker, its log shipper, the warm parent and every task
  process, dead ones counted through their parents' reaped-children times, ``/proc/<pid>/stat``);
- ``PSS``: proportional set size (``/proc/<pid>/smaps_rollup``: shared pages divided among
  their sharers) of the idle worker tree after the warm-up, and per running task (its
  supervisor and task process) sampled every 0.2 s during the ``fanout`` runs (median);
- the load average before and after each mode (other work on the machine: compare within
  one round).

Measured 2026-12-05 (defaults: 2 rounds, 143 tasks per mode), load 6.6 to 17 from other
sessions' test suites; round 1, warm then off::

    chain10 trigger → end p50        1.69 s      31.54 s
    fanout10 trigger → end p50       1.13 s      22.51 s
    fanout100 trigger → end         12.01 s     186.96 s
    hand-over p50/p95/p99       97/144/248 ms   2983/4843/5777 ms
    CPU per task, all / worker tree  119 / 76 ms   2649 / 2572 ms
    PSS idle worker tree / per task  281 / 15.6 MB  172 / 76.4 MB

Round 2 (load 9 to 16): warm chain10 2.93 s, fanout10 1.74 s, hand-over p50 155 ms, CPU
118 / 75 ms; off 54.64 s, 30.25 s, 5094 ms, 2703 / 2611 ms. See docs/worker.md.

``--executor celery``, measured 2026-12-06 on PostgreSQL and Redis (2 shared cores, load 4.8
to 10 from other sessions), one round, warm local worker then one Celery worker, both
``--concurrency 10``::

                                      local warm      celery
    chain10 trigger → end p50          4.42 s          6.20 s
    fanout10 trigger → end p50         2.35 s          3.17 s
    fanout100 trigger → end           20.80 s         24.65 s
    hand-over p50/p95/p99         239/345/492 ms  406/715/1361 ms
    CPU per task, all / worker tree   138 / 81 ms     133 / 75 ms
    PSS idle worker tree / per task   279 / 39.5 MB   189 / 36.8 MB

The Celery hand-over adds the scheduler's pass (woken by the runs channel) and the broker's
round trip to the local worker's claim; the CPU per task is the same (the warm parent's fork
and Airflow's supervisor are most of it). 1,000 parallel trivial tasks (``fanout1000``, 1,001
task instances) over 2 Celery workers of ``--concurrency 8``: 149 s trigger → end (6.7 tasks
a second), 146 ms CPU per task over all processes, 84 ms in the worker trees (load 4 to 12);
one local warm worker of ``--concurrency 16`` (``--modes warm``): 134 s, 136 / 87 ms (load 7
to 13). On one machine the two Celery workers share its 2 cores: spread over machines,
each adds its own.
"""

from __future__ import annotations

import argparse
import itertools
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from io import StringIO
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    REPO,
    bench_environment,
    child_pids,
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

from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402

from assets_app.models import Dag, DagRun, TaskInstance  # noqa: E402
from assets_app.services.runs.dag_runs import dag_run_trigger  # noqa: E402
from bench.common import CLOCK_TICKS, _stat_fields  # noqa: E402
from devtools.processes import ServerStartError, current_database_url, server_start  # noqa: E402

HEADER = """from datetime import datetime

from airflow.sdk import dag, task


def trivial(task_id):
    @task(task_id=task_id)
    def run():
        return None

    return run()

"""

SHAPES = {
    "chain10": HEADER
    + """
@dag(dag_id="bench_chain10", schedule=None, start_date=datetime(2024, 1, 1), catchup=False)
def bench_chain10():
    previous = None
    for i in range(10):
        current = trivial(f"t{i:02d}")
        if previous is not None:
            previous >> current
        previous = current


bench_chain10()
""",
    "fanout10": HEADER
    + """
@dag(dag_id="bench_fanout10", schedule=None, start_date=datetime(2024, 1, 1), catchup=False)
def bench_fanout10():
    [trivial(f"p{i:03d}") for i in range(10)] >> trivial("join")


bench_fanout10()
""",
    "fanout100": HEADER
    + """
@dag(dag_id="bench_fanout100", schedule=None, start_date=datetime(2024, 1, 1), catchup=False)
def bench_fanout100():
    [trivial(f"p{i:03d}") for i in range(100)] >> trivial("join")


bench_fanout100()
""",
    "fanout1000": HEADER
    + """
@dag(dag_id="bench_fanout1000", schedule=None, start_date=datetime(2024, 1, 1), catchup=False)
def bench_fanout1000():
    [trivial(f"p{i:04d}") for i in range(1000)] >> trivial("join")


bench_fanout1000()
""",
}


# --- processes: CPU and PSS ------------------------------------------------------------------


def tree(pid: int) -> list[int]:
    """``pid`` and its live descendants."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(child_pids(current))
    return found


def cpu_with_reaped(pid: int) -> float:
    """User + system CPU of the process and of its children it has reaped (and theirs)."""
    fields = _stat_fields(pid)
    if fields is None:
        return 0.0
    return sum(int(fields[i]) for i in (11, 12, 13, 14)) / CLOCK_TICKS


def tree_cpu(pid: int) -> float:
    return sum(cpu_with_reaped(p) for p in tree(pid))


def worker_parts(worker: int) -> dict[str, float]:
    """The worker tree's CPU by part: the worker (with the task processes it reaped), its log
    shipper, the warm parent (with the supervisors it reaped) and the live task processes."""
    parts = {"worker": cpu_with_reaped(worker), "shipper": 0.0, "warm parent": 0.0, "live": 0.0}
    for child in child_pids(worker):
        line = cmdline(child)
        if "log_shipping" in line:
            parts["shipper"] += tree_cpu(child)
        elif "warm.py" in line:
            parts["warm parent"] += cpu_with_reaped(child)
            parts["live"] += sum(tree_cpu(c) for c in child_pids(child))
        else:
            parts["live"] += tree_cpu(child)
    return parts


def pss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as file:
            for line in file:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        return 0
    return 0


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def backend_pids(database: str) -> list[int]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            [database],
        )
        return [row[0] for row in cursor.fetchall()]


def task_roots(worker: int) -> list[int]:
    """The supervisors of the running tasks: the worker's children (off) or the warm
    parent's (warm), not the log shipper nor the warm parent."""
    roots = []
    for child in child_pids(worker):
        line = cmdline(child)
        if "warm.py" in line:
            roots.extend(child_pids(child))
        elif "log_shipping" not in line:
            roots.append(child)
    return roots


# --- one mode --------------------------------------------------------------------------------


def run_once(dag_id: str, n: int, timeout: float) -> tuple[float, list[float], int]:
    """Trigger, wait for the end: (trigger → end seconds, hand-overs, task instances)."""
    triggered = datetime.now(UTC)
    run = dag_run_trigger(dag_id=dag_id, run_id=f"{dag_id}_{n}_{time.time_ns()}")
    deadline = time.monotonic() + timeout
    while True:
        state, end = DagRun.objects.filter(pk=run.pk).values_list("state", "end_date").get()
        if state in ("success", "failed"):
            break
        if time.monotonic() > deadline:
            raise SystemExit(f"{dag_id} run {n} did not finish in {timeout:g} s")
        time.sleep(0.05)
    if state != "success":
        raise SystemExit(f"{dag_id} run {n} ended {state}")
    rows = {
        task_id: (updated, started)
        for task_id, updated, started in TaskInstance.objects.filter(dag_run=run).values_list(
            "task_id", "updated_at", "start_date"
        )
    }
    handovers = []
    if dag_id == "bench_chain10":
        ids = sorted(rows)
        handovers = [
            (rows[down][1] - rows[up][0]).total_seconds() for up, down in itertools.pairwise(ids)
        ]
    else:
        last_upstream = max(updated for task_id, (updated, _) in rows.items() if task_id != "join")
        handovers = [(rows["join"][1] - last_upstream).total_seconds()]
    return (end - triggered).total_seconds(), handovers, len(rows)


def run_mode(
    mode: str,
    args: argparse.Namespace,
    env: dict[str, str],
    url: str,
    logs: Path,
    others: list[int],
) -> dict[str, object]:
    database = connection.settings_dict["NAME"]
    celery = mode == "celery"
    scheduler_env = {**env, "EXECUTOR": "celery" if celery else "local"}
    if celery:
        scheduler_env["CELERY_BROKER_URL"] = args.broker
    with (logs / f"scheduler-{mode}.log").open("ab") as log:
        scheduler = subprocess.Popen(
            [sys.executable, "manage.py", "scheduler", "--interval", "1"],
            cwd=REPO,
            env=scheduler_env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    others = [*others, scheduler.pid]
    workers: list[subprocess.Popen[bytes]] = []
    for n in range(args.celery_workers if celery else 1):
        with (logs / f"worker-{mode}-{n}.log").open("ab") as log:
            if celery:  # a worker machine's environment: no database URL, no secret
                worker_env = {
                    "PATH": env.get("PATH", "/usr/bin:/bin"),
                    "HOME": env.get("HOME", "/tmp"),  # noqa: S108 - a fallback home
                    "PYTHONPATH": str(REPO),
                    "CELERY_BROKER_URL": args.broker,
                    "EXECUTION_API_URL": url,
                    "AIRFLOW__CORE__DAGS_FOLDER": str(logs / "dags"),
                    "AIRFLOW_HOME": str(logs / "airflow_home"),
                    "WORKER_LOG_DIR": str(logs / f"tasks-{n}"),
                }
                argv = [
                    *(sys.executable, "manage.py", "celery_worker", "--loglevel", "WARNING"),
                    *("--concurrency", str(args.concurrency), "--hostname", f"bench{n}@%h"),
                ]
            else:
                worker_env = {**env, "WORKER_WARM": "true" if mode == "warm" else "false"}
                argv = [
                    *(sys.executable, "manage.py", "worker", "--server", url),
                    *("--log-dir", str(logs / "tasks"), "--concurrency", str(args.concurrency)),
                ]
            workers.append(
                subprocess.Popen(
                    argv, cwd=REPO, env=worker_env, stdout=log, stderr=subprocess.STDOUT
                )
            )
    worker = workers[0]
    try:
        time.sleep(2)
        run_once("bench_chain10", -1, args.timeout)  # warm-up: imports, the warm parent, parse
        time.sleep(1.5)  # the log shipper's last sending
        idle_pss = sum(pss_kib(p) for w in workers for p in tree(w.pid))
        load_before = load_average()
        backends = backend_pids(database)
        cpu_before = {p: cpu_with_reaped(p) for p in backends}
        others_before = sum(tree_cpu(p) for p in others)
        worker_before = sum(tree_cpu(w.pid) for w in workers)
        parts_before = workers_parts(workers)
        results: dict[str, list[float]] = {}
        handovers: list[float] = []
        tasks = 0
        per_task_pss: list[float] = []
        for shape in args.shapes:
            runs = {"fanout100": args.runs_fanout100, "fanout1000": args.runs_fanout1000}.get(
                shape, args.runs
            )
            for n in range(runs):
                seconds, edges, count = run_once_sampled(
                    f"bench_{shape}", n, args.timeout, worker.pid, per_task_pss
                )
                results.setdefault(shape, []).append(seconds)
                handovers += edges
                tasks += count
        time.sleep(1.5)
        worker_cpu = sum(tree_cpu(w.pid) for w in workers) - worker_before
        parts_after = workers_parts(workers)
        parts = {name: parts_after[name] - parts_before[name] for name in parts_after}
        backends_after = set(backend_pids(database)) | set(backends)
        # a backend that ended meanwhile (a connection past CONN_MAX_AGE) is not counted
        pg_cpu = sum(
            cpu_with_reaped(p) - cpu_before.get(p, 0.0)
            for p in backends_after
            if _stat_fields(p) is not None
        )
        others_cpu = sum(tree_cpu(p) for p in others) - others_before
        return {
            "runs": results,
            "handovers": handovers,
            "tasks": tasks,
            "worker_cpu": worker_cpu,
            "all_cpu": worker_cpu + pg_cpu + others_cpu,
            "pg_cpu": pg_cpu,
            "parts": parts,
            "idle_pss": idle_pss,
            "task_pss": percentile(per_task_pss, 50) if per_task_pss else float("nan"),
            "load": (load_before, load_average()),
        }
    finally:
        for one in workers:
            process_stop(one)
        process_stop(scheduler)


def workers_parts(workers: list[subprocess.Popen[bytes]]) -> dict[str, float]:
    """:func:`worker_parts` summed over the workers."""
    total: dict[str, float] = {}
    for one in workers:
        for name, cpu in worker_parts(one.pid).items():
            total[name] = total.get(name, 0.0) + cpu
    return total


def run_once_sampled(
    dag_id: str, n: int, timeout: float, worker: int, per_task_pss: list[float]
) -> tuple[float, list[float], int]:
    """:func:`run_once`, sampling the running tasks' PSS meanwhile (fan-outs only)."""
    if "fanout" not in dag_id:
        return run_once(dag_id, n, timeout)
    import threading

    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.2):
            # a task that is just ending (a zombie, gone) has no PSS to read: not counted
            sizes = [sum(pss_kib(p) for p in tree(r)) for r in task_roots(worker)]
            sizes = [size for size in sizes if size > 0]
            if sizes:
                per_task_pss.append(sum(sizes) / len(sizes))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        return run_once(dag_id, n, timeout)
    finally:
        done.set()
        sampler.join()


def report(mode: str, result: dict[str, object]) -> None:
    runs: dict[str, list[float]] = result["runs"]  # type: ignore[assignment]
    handovers: list[float] = result["handovers"]  # type: ignore[assignment]
    tasks: int = result["tasks"]  # type: ignore[assignment]
    load_before, load_after = result["load"]  # type: ignore[misc]
    print(f"\n{mode}: {load_before} → {load_after}")
    for shape, seconds in runs.items():
        print(
            f"  {shape:10s} trigger → run end: p50 {percentile(seconds, 50):6.2f} s  "
            f"max {max(seconds):6.2f} s  ({len(seconds)} runs)"
        )
    print(
        f"  hand-over (ms, {len(handovers)}): "
        + "  ".join(f"p{q} {percentile(handovers, q) * 1000:.0f}" for q in (50, 95, 99))
        + f"  max {max(handovers) * 1000:.0f}"
    )
    all_cpu: float = result["all_cpu"]  # type: ignore[assignment]
    worker_cpu: float = result["worker_cpu"]  # type: ignore[assignment]
    pg_cpu: float = result["pg_cpu"]  # type: ignore[assignment]
    print(
        f"  CPU per task ({tasks} tasks): all processes {all_cpu / tasks * 1000:.0f} ms, "
        f"worker tree {worker_cpu / tasks * 1000:.0f} ms, PostgreSQL backends "
        f"{pg_cpu / tasks * 1000:.0f} ms"
    )
    parts: dict[str, float] = result["parts"]  # type: ignore[assignment]
    print(
        "  worker tree per task: "
        + ", ".join(f"{name} {cpu / tasks * 1000:.0f} ms" for name, cpu in parts.items())
    )
    print(
        f"  PSS: idle worker tree {result['idle_pss'] / 1024:.0f} MB, per running task "  # type: ignore[operator]
        f"{result['task_pss'] / 1024:.1f} MB"  # type: ignore[operator]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--modes",
        default=None,
        help="warm, off, celery (alternated; default warm,off, with --executor celery warm,celery)",
    )
    parser.add_argument(
        "--executor",
        choices=("local", "celery"),
        default="local",
        help="celery: add the mode celery (EXECUTOR=celery, manage.py celery_worker)",
    )
    parser.add_argument(
        "--broker", default="redis://127.0.0.1:6379/0", help="CELERY_BROKER_URL (mode celery)"
    )
    parser.add_argument(
        "--celery-workers", type=int, default=1, help="celery_worker processes (mode celery)"
    )
    parser.add_argument("--rounds", type=int, default=2, help="rounds of the modes")
    parser.add_argument("--runs", type=int, default=3, help="runs of chain10 and fanout10")
    parser.add_argument("--runs-fanout100", type=int, default=1)
    parser.add_argument("--runs-fanout1000", type=int, default=1)
    parser.add_argument("--shapes", default="chain10,fanout10,fanout100")
    parser.add_argument("--concurrency", type=int, default=10, help="worker --concurrency")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per run at most")
    args = parser.parse_args()
    args.shapes = [s for s in args.shapes.split(",") if s]
    default_modes = "warm,celery" if args.executor == "celery" else "warm,off"
    modes = [m for m in (args.modes or default_modes).split(",") if m]
    if not set(modes) <= {"warm", "off", "celery"} or not set(args.shapes) <= set(SHAPES):
        parser.error(f"--modes: warm, off, celery; --shapes: {', '.join(SHAPES)}")
    if "celery" in modes and args.executor != "celery":
        parser.error("--modes celery needs --executor celery")
    if args.celery_workers < 1 or args.concurrency < 1:
        parser.error("--celery-workers and --concurrency must be at least 1")
    if connection.vendor != "postgresql":
        raise SystemExit("bench_dag_files.py needs PostgreSQL (DATABASE_URL=postgres://...)")
    logging.getLogger().setLevel(logging.WARNING)  # this process only
    logging.disable(logging.INFO)
    stop_on_signals()
    logs = Path(tempfile.mkdtemp(prefix="ar-bench-dagfiles-"))
    folder = logs / "dags"
    folder.mkdir()
    for shape in SHAPES:
        (folder / f"bench_{shape}.py").write_text(SHAPES[shape])
    failed = True
    children: list[subprocess.Popen[bytes]] = []
    try:
        with scratch_database("dagfiles"):
            try:
                call_command("declare_dags", "--dags-folder", str(folder), stdout=StringIO())
                Dag.objects.filter(dag_id__startswith="bench_").update(is_paused=False)
                env = dict(
                    os.environ,
                    DATABASE_URL=current_database_url(),
                    AIRFLOW_HOME=str(logs / "airflow_home"),
                )
                with (logs / "gunicorn.log").open("wb") as log:
                    try:
                        server, url = server_start(env=env, stdout=log, workers=1, threads=8)
                    except ServerStartError as exc:
                        raise SystemExit(f"{exc}, see {logs / 'gunicorn.log'}") from exc
                children.append(server)
                print(
                    f"DAG files {', '.join(args.shapes)}; modes {', '.join(modes)} alternated, "
                    f"{args.rounds} round(s); worker --concurrency {args.concurrency}"
                    f"{f', {args.celery_workers} celery worker(s)' if 'celery' in modes else ''}; "
                    f"{load_average()}",
                    flush=True,
                )
                others = [child.pid for child in children]
                for round_ in range(args.rounds):
                    for mode in modes:
                        print(f"\nround {round_ + 1}, {mode} ...", flush=True)
                        report(mode, run_mode(mode, args, env, url, logs, others))
                failed = False
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


if __name__ == "__main__":
    main()
