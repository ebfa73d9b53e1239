"""Benchmark the triggerer: many deferred sensors waiting at once (issue 39's acceptance).

Usage (from the repository root)::

    .venv/bin/python bench/bench_triggerer.py                  # 200 sensors, 2 triggerers
    .venv/bin/python bench/bench_triggerer.py --sensors 1000 --triggerers 1

PostgreSQL only (``DATABASE_URL`` names the server, default
``postgres://postgres@127.0.0.1:5432/ar_bench``); a scratch database is created and dropped.

The workload: one DAG of ``--sensors`` tasks, one run. Each task instance is started and
deferred through the execution API's service (``task_instance_state_update`` with a
``deferred`` payload, what ``PATCH …/state`` calls), as Airflow's SDK sends it for
``TimeDeltaSensor(deferrable=True)``: Airflow's ``DateTimeTrigger``, its moment spread over
``--spread`` seconds starting ``--lead`` seconds after the last deferral. Then
``--triggerers`` ``manage.py triggerer`` processes run (``--capacity`` each) until every task
instance is ``scheduled`` again.

It prints: how many task instances held a worker slot (``queued``/``running``) while
deferred (0 is the point), each triggerer's CPU seconds and peak RSS, and the lag from each
trigger's moment to its task instance's resume (the ``updated_at`` of its ``scheduled``
row): p50, p99, max.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import (
    REPO,
    bench_environment,
    load_average,
    percentile,
    process_cpu_seconds,
    process_stop,
    scratch_database,
    stop_on_signals,
)

bench_environment()

import django  # noqa: E402

django.setup()

import yaml  # noqa: E402
from django.db import connection  # noqa: E402

from devtools.processes import current_database_url  # noqa: E402

CLASSPATH = "airflow.providers.standard.triggers.temporal.DateTimeTrigger"
#: a triggerer's log line for a fired trigger: its time and id
FIRED = re.compile(r"^(?P<ts>\S+Z) \[info\s*\] trigger (?P<id>\d+) fired")


def peak_rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def defer_all(sensors: int, lead: float, spread: float) -> dict[str, datetime]:
    """Declare, trigger, start and defer every sensor; their moments by task id."""
    from airflow.sdk.serde import serialize
    from django.utils import timezone

    from assets_app.models import TaskInstance
    from assets_app.services.dags.declare import dags_declare
    from assets_app.services.dags.manifest import manifest_parse
    from assets_app.services.runs.dag_runs import dag_run_trigger
    from assets_app.services.runs.state import DeferredPayload, task_instance_state_update

    tasks = [{"task_id": f"s{n}"} for n in range(sensors)]
    manifest = yaml.safe_dump({"dags": [{"dag_id": "sensors", "tasks": tasks}]})
    dags_declare(manifest=manifest_parse(yaml.safe_load(manifest)), fileloc="bench.yaml")
    run = dag_run_trigger(dag_id="sensors")
    TaskInstance.objects.filter(dag_run=run).update(
        state="running", start_date=timezone.now(), hostname="bench"
    )
    first = datetime.now(UTC) + timedelta(seconds=lead)
    moments: dict[str, datetime] = {}
    for n, ti in enumerate(TaskInstance.objects.filter(dag_run=run).order_by("task_id")):
        moment = first + timedelta(seconds=spread * n / max(sensors - 1, 1))
        moments[ti.task_id] = moment
        task_instance_state_update(
            task_instance_id=ti.pk,
            payload=DeferredPayload(
                classpath=CLASSPATH,
                trigger_kwargs=serialize({"moment": moment, "end_from_trigger": False}),
                next_method="execute_complete",
                next_kwargs={},
                trigger_timeout=timedelta(days=7),
            ),
        )
    return moments


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sensors", type=int, default=200)
    parser.add_argument("--triggerers", type=int, default=2)
    parser.add_argument("--capacity", type=int, default=1000)
    parser.add_argument("--lead", type=float, default=15.0, help="seconds to the first moment")
    parser.add_argument("--spread", type=float, default=10.0, help="seconds of moments")
    args = parser.parse_args()
    if connection.vendor != "postgresql":
        raise SystemExit("bench_triggerer.py needs PostgreSQL (DATABASE_URL=postgres://...)")
    logging.getLogger().setLevel(logging.WARNING)
    stop_on_signals()
    with scratch_database("triggerer"):
        from assets_app.models import TaskInstance

        started = time.monotonic()
        moments = defer_all(args.sensors, args.lead, args.spread)
        print(f"deferred {len(moments)} sensors in {time.monotonic() - started:.1f} s")
        holding = TaskInstance.objects.filter(state__in=["queued", "running"]).count()
        print(f"task instances holding a worker slot while deferred: {holding}")
        trigger_of = dict(TaskInstance.objects.values_list("trigger_id", "task_id"))
        env = dict(os.environ, DATABASE_URL=current_database_url())
        workdir = Path(tempfile.mkdtemp(prefix="ar-bench-triggerer-"))
        children = []
        for n in range(args.triggerers):
            with (workdir / f"triggerer-{n}.out").open("w") as out:
                children.append(
                    subprocess.Popen(
                        [
                            *(sys.executable, "manage.py", "triggerer"),
                            *("--capacity", str(args.capacity)),
                        ],
                        cwd=REPO,
                        env=env,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                    )
                )
        try:
            deadline = time.monotonic() + args.lead + args.spread + 120
            while TaskInstance.objects.filter(state="deferred").exists():
                if time.monotonic() > deadline:
                    raise SystemExit("not every sensor resumed in time")
                time.sleep(0.5)
            cpu = {p.pid: process_cpu_seconds(p.pid) for p in children}
            rss = {p.pid: peak_rss_mb(p.pid) for p in children}
        finally:
            for child in children:
                process_stop(child)
        resumed = dict(
            TaskInstance.objects.filter(state="scheduled").values_list("task_id", "updated_at")
        )
        lags = [(resumed[t] - moment).total_seconds() for t, moment in moments.items()]
        fired: dict[str, datetime] = {}
        for out_file in workdir.glob("triggerer-*.out"):
            for line in out_file.read_text(errors="replace").splitlines():
                if match := FIRED.match(line):
                    fired[trigger_of[int(match["id"])]] = datetime.fromisoformat(match["ts"])
        shutil.rmtree(workdir, ignore_errors=True)
        submit_lags = [(resumed[t] - at).total_seconds() for t, at in fired.items()]
        report = {
            "load_average": load_average(),
            "sensors": args.sensors,
            "triggerers": args.triggerers,
            "holding_a_slot_while_deferred": holding,
            "triggerer_cpu_seconds": [round(c or 0.0, 2) for c in cpu.values()],
            "triggerer_peak_rss_mb": [round(r or 0.0, 1) for r in rss.values()],
            "resume_lag_seconds": {
                "p50": round(percentile(lags, 50), 3),
                "p99": round(percentile(lags, 99), 3),
                "max": round(max(lags), 3),
                "min": round(min(lags), 3),
            },
            # the registry's part: from the trigger's event to its task instance scheduled
            # (DateTimeTrigger itself polls once a second: 0-1 s of the lag above is its own)
            "event_to_resume_seconds": {
                "events": len(submit_lags),
                "p50": round(percentile(submit_lags, 50), 3),
                "p99": round(percentile(submit_lags, 99), 3),
                "max": round(max(submit_lags, default=float("nan")), 3),
            },
        }
        print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
