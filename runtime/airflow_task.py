"""Run one task instance under Apache Airflow's own worker: the ``ExecuteTask`` workload in a
JSON file (``runtime.launch.airflow_workload``), supervised by Airflow's task SDK, its log on
stdout once.

Run as a script by the worker (``runtime.launch``), in the child process of one task
instance; it imports nothing of the registry, only Airflow::

    python runtime/airflow_task.py --json-path /tmp/workload-….json

What Airflow's ``python -m airflow.sdk.execution_time.execute_workload`` does, but without
copying the task's log lines to stdout a second time (its ``subprocess_logs_to_stdout``, meant
for pod logs next to a log file): with no log file, the supervisor already logs them there, and
the worker keeps stdout as the task instance's log.
"""

from __future__ import annotations

import argparse
import sys


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json-path", required=True, help="the workload, as JSON")
    args = parser.parse_args()

    from airflow.executors import workloads
    from airflow.executors.base_executor import BaseExecutor
    from airflow.sdk.log import configure_logging
    from airflow.settings import dispose_orm

    with open(args.json_path) as file:
        workload = workloads.ExecuteTask.model_validate_json(file.read())
    dispose_orm(do_log=False)
    configure_logging(output=sys.stdout.buffer, json_output=True)
    BaseExecutor.run_workload(workload, subprocess_logs_to_stdout=False)


if __name__ == "__main__":
    main()
