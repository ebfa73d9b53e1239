"""Run one callback of an Airflow DAG file, as Airflow's DAG processor does: a DAG-level
``on_success_callback`` / ``on_failure_callback`` (``_execute_dag_callbacks``), or a task's
``on_failure_callback`` / ``on_retry_callback`` for a try that ended outside its process
(``_execute_task_callbacks``).

Run as a script by :mod:`runtime.dag_callbacks` under ``DAG_PARSER_PYTHON`` (an interpreter
with Airflow), a request as JSON on stdin::

    {"file": "/dags/nightly.py", "bundle": "/dags", "dag_id": "nightly", "kind": "failure",
     "reason": "task_failure", "dag_run": {"dag_id": ..., "run_id": ..., ...},
     "ti": null}

``ti`` (a task's callback): ``{"id", "task_id", "map_index", "try_number", "max_tries"}``.

It imports the file with Airflow's ``DagBag`` and calls each callback of that kind: a DAG's
with Airflow's DAG context (``dag``, ``dag_run``, ``run_id``, ``reason``, ``logical_date``,
``params``, ``conf``), a task's with the task instance's template context (Airflow's
``RuntimeTaskInstance.get_template_context``). A callback that raises is reported (its
traceback on stderr), and the next one still runs; the exit status is 1 if any raised, 2 if
the DAG, the task or the callback could not be found, else 0.
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


def _task_context(dag: Any, task: Any, ti: dict[str, Any], dag_run: Any) -> dict[str, Any]:
    """A task instance's template context, as Airflow's DAG processor builds it for a task
    callback (``RuntimeTaskInstance.model_construct(...).get_template_context()``)."""
    from airflow.sdk.api.datamodels._generated import TIRunContext
    from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance

    runtime_ti = RuntimeTaskInstance.model_construct(
        id=ti["id"],
        task_id=task.task_id,
        dag_id=dag.dag_id,
        run_id=dag_run.run_id,
        try_number=ti["try_number"],
        map_index=ti["map_index"],
        dag_version_id=ti.get("dag_version_id"),
        max_tries=ti["max_tries"],
        task=task,
        _ti_context_from_server=TIRunContext.model_construct(
            dag_run=dag_run, max_tries=ti["max_tries"], task_reschedule_count=0
        ),
    )
    return dict(runtime_ti.get_template_context())


def _callbacks(dag: Any, request: dict[str, Any]) -> tuple[str, Any, dict[str, Any]]:
    """What the request runs: its label, its callbacks (``None``: none) and their context."""
    dag_run = _dag_run(request["dag_run"])
    kind = request["kind"]
    ti = request.get("ti")
    if ti:
        task = dag.get_task(ti["task_id"])  # KeyError: no such task any more
        return (
            f"on_{kind} task callback of {dag.dag_id}.{task.task_id}",
            getattr(task, f"on_{kind}_callback"),
            _task_context(dag, task, ti, dag_run),
        )
    context: dict[str, Any] = {
        "dag": dag,
        "dag_run": dag_run,
        "run_id": dag_run.run_id,
        "reason": request.get("reason"),
        "logical_date": dag_run.logical_date,
        "conf": dag_run.conf,
        "params": {**dict(dag.params), **(dag_run.conf or {})},
    }
    callbacks = dag.on_failure_callback if kind == "failure" else dag.on_success_callback
    return f"on_{kind} dag callback of {dag.dag_id}", callbacks, context


def run(request: dict[str, Any]) -> int:
    try:
        dag = _dag(request)
        label, callbacks, context = _callbacks(dag, request)
    except Exception:  # reported: the processor records it
        traceback.print_exc()
        return CANNOT_LOAD
    if not callbacks:
        sys.stderr.write(f"no {label} any more\n")
        return CANNOT_LOAD
    callbacks = callbacks if isinstance(callbacks, list | tuple) else [callbacks]
    failures = []
    for callback in callbacks:
        sys.stderr.write(f"Executing {label}\n")
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
