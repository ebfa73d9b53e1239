"""The DAG processor's callbacks: each pass it claims the pending callback requests, a DAG's
or a task's (``assets_app.services.runs.callbacks``), and runs each in a subprocess with the
DAG file's code (:mod:`runtime.dag_callback_runner` under ``DAG_PARSER_PYTHON``, killed after
``CALLBACK_TIMEOUT``), recording it ``success`` or ``failed`` with what it printed. A failing
callback never changes its run or task instance; it is logged and shown in the admin.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import uuid
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from django.conf import settings

from assets_app.models import DagCallbackRequest, DagTask, TaskInstance
from assets_app.services.runs.callbacks import (
    CALLBACK_TIMEOUT,
    dag_callback_finish,
    dag_callbacks_claim,
)
from runtime import dag_callback_runner
from runtime.dag_processing import _parser_env

logger = logging.getLogger(__name__)

RUNNER_SCRIPT = dag_callback_runner.__file__
#: How much of a failed callback's output is kept.
OUTPUT_TAIL = 8000


@dataclass(frozen=True)
class CallbackOutcome:
    request_id: int
    label: str
    error: str  # "" when it succeeded


def dag_callbacks_run(*, limit: int = 10) -> list[CallbackOutcome]:
    """Run the pending callback requests (up to ``limit``), each once."""
    outcomes = []
    for request in dag_callbacks_claim(limit=limit):
        error = _run_one(request)
        dag_callback_finish(request_ids=[request.pk], error=error)
        who = f"{request.dag_id}.{request.task_id}" if request.task_id else request.dag_id
        label = f"{request.get_kind_display()} of {who} / {request.dag_run.run_id}"
        if error:
            logger.warning("DAG callback %s failed: %s", label, error.strip().splitlines()[-1:])
        else:
            logger.info("DAG callback %s ran", label)
        outcomes.append(CallbackOutcome(request_id=request.pk, label=label, error=error))
    return outcomes


def _run_one(request: DagCallbackRequest) -> str:
    """Run one request's callback; ``""`` or why it failed."""
    code = (
        DagTask.objects.filter(dag_id=request.dag_id)
        .exclude(airflow_dag_file="")
        .values_list("airflow_dag_file", "airflow_dags_folder")
        .first()
    )
    if code is None:
        return f"DAG {request.dag_id!r} has no Airflow DAG file to run its callback from"
    dag_file, dags_folder = code
    folder = Path(dags_folder or Path(dag_file).parent)
    run = request.dag_run
    document = {
        "file": dag_file,
        "bundle": str(folder),
        "dag_id": request.dag_id,
        "kind": request.kind,
        "reason": request.reason,
        "ti": _task_instance(request),
        "dag_run": {
            "dag_id": run.dag_id,
            "run_id": run.run_id,
            "logical_date": _iso(run.logical_date),
            "data_interval_start": _iso(run.data_interval_start),
            "data_interval_end": _iso(run.data_interval_end),
            "run_after": _iso(run.run_after),
            "start_date": _iso(run.start_date),
            "end_date": _iso(run.end_date),
            "run_type": run.run_type,
            "state": run.state,
            "conf": run.conf,
            "partition_key": run.partition_key,
        },
    }
    try:
        process = subprocess.Popen(  # noqa: S603 - our script, the configured interpreter
            [settings.DAG_PARSER_PYTHON, RUNNER_SCRIPT],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=_parser_env(folder),
            cwd=folder,
            start_new_session=True,
        )
    except OSError as exc:
        return f"cannot start {settings.DAG_PARSER_PYTHON!r} (DAG_PARSER_PYTHON): {exc}"
    try:
        output, _ = process.communicate(json.dumps(document).encode(), timeout=CALLBACK_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        return f"the callback did not end within {CALLBACK_TIMEOUT:g} s; it was killed"
    text = output.decode("utf-8", errors="replace")
    if process.returncode:
        return text[-OUTPUT_TAIL:] or f"the callback's process exited {process.returncode}"
    return ""


def _task_instance(request: DagCallbackRequest) -> dict[str, Any] | None:
    """A task callback's task instance as the runner needs it (``None``: a DAG's callback);
    its ``max_tries`` is read now (the try's own, kept by its history row, is the same)."""
    if not request.task_id:
        return None
    ti = (
        TaskInstance.objects.filter(
            dag_run_id=request.dag_run_id, task_id=request.task_id, map_index=request.map_index
        )
        .values("id", "max_tries")
        .first()
    )
    return {
        "id": str(ti["id"]) if ti else str(uuid.uuid4()),
        "task_id": request.task_id,
        "map_index": request.map_index,
        "try_number": request.try_number,
        "max_tries": ti["max_tries"] if ti else 0,
    }


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()
