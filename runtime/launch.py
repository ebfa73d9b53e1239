"""How to run one task instance: the child process the worker starts for it.

- a task with a ``callable`` runs under the ``task_sdk`` supervisor (``python -m task_sdk
  run``), started as a fork of the worker (:mod:`task_sdk.forking`);
- a task of a DAG with an ``airflow_dag_file`` runs under Airflow's own worker entry point
  (``runtime/airflow_task.py``: Airflow's ``execute_workload`` with the task's log on stdout
  once; the ``airflow`` extra) with the folder the file was loaded from (else the file's own)
  as the ``dags-folder`` bundle.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runtime import airflow_task

if TYPE_CHECKING:  # importable without Django: the Celery worker (runtime.celery_worker) is
    from assets_app.models import DagTask, TaskInstance

#: The bundle name Airflow gives ``[core] dags_folder``.
AIRFLOW_BUNDLE = "dags-folder"
#: The child's entry point for a DAG file's task: Airflow's worker (see the script), run by its
#: path, taken from the imported module.
AIRFLOW_TASK_SCRIPT = airflow_task.__file__

#: ``dag_version_id`` is required by Airflow's worker but only passed through.
AIRFLOW_DAG_VERSION_ID = "00000000-0000-0000-0000-000000000000"


class TaskCodeError(Exception):
    """The code of a task instance cannot be found; the message says why."""


def airflow_workload(
    *, ti: TaskInstance, token: str, dag_rel_path: str, queue: str = "default"
) -> dict[str, Any]:
    """The ``ExecuteTask`` workload Airflow's executors hand to its worker entry point
    (``airflow_task.py --json-path``), for a DAG file in the ``dags-folder`` bundle; also what
    ``EXECUTOR=celery`` sends to the task's Celery ``queue``."""
    return {
        "type": "ExecuteTask",
        "token": token,
        "log_path": None,
        "bundle_info": {"name": AIRFLOW_BUNDLE},
        "dag_rel_path": dag_rel_path,
        "ti": {
            "id": str(ti.pk),
            "dag_id": ti.dag_id,
            "task_id": ti.task_id,
            "run_id": ti.run_id,
            "try_number": ti.try_number,
            "map_index": ti.map_index,
            "dag_version_id": AIRFLOW_DAG_VERSION_ID,
            "pool_slots": ti.pool_slots,
            "priority_weight": ti.priority_weight,
            "queue": queue,
        },
    }


def _airflow_available() -> bool:
    try:
        return importlib.util.find_spec("airflow.sdk.execution_time.execute_workload") is not None
    except ModuleNotFoundError:
        return False


@dataclass
class TaskLaunch:
    """The child process that runs one task instance, and a file to delete after it.

    ``argv`` is the command to start; ``forked``: the arguments of ``python -m task_sdk``,
    run in a fork of the worker instead; ``workload``: a DAG file's ``ExecuteTask`` as JSON,
    which the worker's warm parent (:mod:`runtime.warm`) runs in a fork of its own when it can
    (else ``argv`` runs it)."""

    argv: list[str]
    env: dict[str, str]
    forked: bool = False
    scratch: Path | None = None
    workload: str | None = None


def airflow_env(*, server: str, airflow_home: Path, base: dict[str, str]) -> dict[str, str]:
    """``base`` (the worker's environment) with what Airflow's worker needs: its home, the
    execution API's URL, no examples, the ``dags-folder`` bundle only. The warm parent's
    environment; a task's adds its ``dags_folder``."""
    env = dict(base)
    env.pop("AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST", None)  # the dags-folder bundle
    env.update(
        AIRFLOW_HOME=env.get("AIRFLOW_HOME") or str(airflow_home),
        AIRFLOW__CORE__EXECUTION_API_SERVER_URL=f"{server.rstrip('/')}/execution/",
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        PYTHONUNBUFFERED="1",
    )
    return env


def task_launch(
    *,
    ti: TaskInstance,
    dag_task: DagTask | None,
    server: str,
    token: str,
    airflow_home: Path,
) -> TaskLaunch:
    """How to run ``ti``: its task's ``callable`` under ``task_sdk``, or its DAG's Airflow DAG
    file under Airflow's worker. Raises ``TaskCodeError`` when neither can run."""
    label = f"{ti.dag_id}.{ti.task_id}"
    if dag_task is None or not (dag_task.callable or dag_task.airflow_dag_file):
        raise TaskCodeError(
            f"{label} has no code to run: the manifest names no 'callable' for the task and no "
            "'airflow_dag_file' for its DAG"
        )
    env = dict(os.environ)
    if dag_task.callable:
        env.update(TASK_SDK_TOKEN=token, PYTHONUNBUFFERED="1")
        sdk_args = [
            *("run", "--server", server),
            *("--ti-id", str(ti.pk), "--try-number", str(ti.try_number)),
            *("--task-id", ti.task_id),  # its XComs go under it, whatever the function's name
            dag_task.callable,
        ]
        return TaskLaunch(argv=sdk_args, env=env, forked=True)
    dag_file = Path(dag_task.airflow_dag_file)
    if not dag_file.is_file():
        raise TaskCodeError(f"{label}: Airflow DAG file not found: {dag_file}")
    if not _airflow_available():
        raise TaskCodeError(
            f"{label}: running an airflow_dag_file needs Apache Airflow's task SDK "
            "(pip install -e '.[airflow]')"
        )
    # Airflow's dags_folder: where the file was loaded from (its imports start there), else the
    # file's own folder
    dags_folder = Path(dag_task.airflow_dags_folder or dag_file.parent)
    if not dag_file.is_relative_to(dags_folder):
        dags_folder = dag_file.parent
    env = airflow_env(server=server, airflow_home=airflow_home, base=env)
    env["AIRFLOW__CORE__DAGS_FOLDER"] = str(dags_folder)
    workload = airflow_workload(
        ti=ti, token=token, dag_rel_path=dag_file.relative_to(dags_folder).as_posix()
    )
    # the token goes in a private file, not on the command line where `ps` shows it
    fd, name = tempfile.mkstemp(prefix="workload-", suffix=".json")
    text = json.dumps(workload)
    with os.fdopen(fd, "w") as file:
        file.write(text)
    argv = [sys.executable, AIRFLOW_TASK_SCRIPT, "--json-path", name]
    return TaskLaunch(argv=argv, env=env, scratch=Path(name), workload=text)
