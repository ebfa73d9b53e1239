"""Run one DAG-level callback (``on_success_callback`` / ``on_failure_callback``) of an Airflow
DAG file, as Airflow's DAG processor does (``_execute_dag_callbacks``).

Run as a script by :mod:`runtime.dag_callbacks` under ``DAG_PARSER_PYTHON`` (an interpreter
with Airflow), a request as JSON on stdin::

    {"file": "/dags/nightly.py", "bundle": "/dags", "dag_id": "nightly", "kind": "failure",
     "reason": "task_failure", "dag_run": {"dag_id": ..., "run_id": ..., ...}}

It imports the file with Airflow's ``DagBag`` and calls each of the DAG's callbacks of that
kind with Airflow's context (``dag``, ``dag_run``, ``run_id``, ``reason``, ``logical_date``,
``params``, ``conf``). A callback that raises is reported (its traceback on stderr), and the
next one still runs; the exit status is 1 if any raised or the DAG could not be loaded, else 0.
Standalone, as :mod:`runtime.dag_parse`: it imports nothing of the registry.
"""

from __future__ import annotations

import json
import sys
import traceback
from datetime import datetime
from pathlib import Path
from typing import Any

#: The exit status when the DAG or its callback cannot be found or loaded.
CANNOT_LOAD = 2


def _dag(request: dict[str, Any]) -> Any:
    from airflow.dag_processing.dagbag import BundleDagBag, DagBag

    bundle = request.get("bundle") or None
    bag = (BundleDagBag if bundle else DagBag)(
        dag_folder=request["file"],
        bundle_path=Path(bundle) if bundle else None,
        bundle_name="dags-folder",
        safe_mode=False,
        collect_dags=True,
    )
    dag = bag.dags.get(request["dag_id"])
    if dag is None:
        errors = "; ".join(str(text) for text in bag.import_errors.values())
        raise LookupError(f"{request['file']} has no DAG {request['dag_id']!r} {errors}".strip())
    return dag


def _dag_run(fields: dict[str, Any]) -> Any:
    """Airflow's runtime ``DagRun`` (what a task's context holds as ``dag_run``)."""
    from airflow.sdk.api.datamodels._generated import DagRun

    values = dict(fields)
    for name in (
        "logical_date",
        "data_interval_start",
        "data_interval_end",
        "run_after",
        "start_date",
        "end_date",
    ):
        if values.get(name):
            values[name] = datetime.fromisoformat(values[name])
    values.setdefault("consumed_asset_events", [])
    return DagRun.model_construct(**values)


def run(request: dict[str, Any]) -> int:
    try:
        dag = _dag(request)
    except Exception:  # reported: the processor records it
        traceback.print_exc()
        return CANNOT_LOAD
    failure = request["kind"] == "failure"
    callbacks = dag.on_failure_callback if failure else dag.on_success_callback
    if not callbacks:
        sys.stderr.write(f"DAG {dag.dag_id!r} has no on_{request['kind']}_callback any more\n")
        return CANNOT_LOAD
    callbacks = callbacks if isinstance(callbacks, list) else [callbacks]
    dag_run = _dag_run(request["dag_run"])
    context: dict[str, Any] = {
        "dag": dag,
        "dag_run": dag_run,
        "run_id": dag_run.run_id,
        "reason": request.get("reason"),
        "logical_date": dag_run.logical_date,
        "conf": dag_run.conf,
        "params": {**dict(dag.params), **(dag_run.conf or {})},
    }
    failures = []
    for callback in callbacks:
        sys.stderr.write(f"Executing on_{request['kind']} dag callback of {dag.dag_id}\n")
        try:
            callback(context)
        except Exception as exc:  # as Airflow: logged, the next callback runs
            sys.stderr.write("Callback failed\n")
            traceback.print_exc()
            failures.append(f"{type(exc).__name__}: {exc}")
    if failures:  # the last line says what failed
        sys.stderr.write(
            f"{len(failures)} of {len(callbacks)} callback(s) failed: {'; '.join(failures)}\n"
        )
        return 1
    return 0


def main() -> int:
    return run(json.loads(sys.stdin.read()))


if __name__ == "__main__":
    sys.exit(main())
