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

It also ends as soon as the task process has (:func:`exit_watch_install`): Airflow's
supervisor learns that its task process exited only between two waits on the task's sockets,
and the task process closes those sockets just before it exits. When the last one closes first
(the usual order), the supervisor finds the process still alive, then waits on no socket at
all for ``[workers] min_heartbeat_interval`` (5 s) before it looks again: every task's process
lingered that long after its final state was reported, holding a worker slot.
:mod:`runtime.warm` runs the same supervisor, fixed the same way, in its forked children.
"""

from __future__ import annotations

import argparse
import os
import selectors
import sys
from typing import Any


class _ExitWatch:
    """A pidfd of the task process, watched by the supervisor's selector beside the sockets:
    readable once the process has exited."""

    def __init__(self, pid: int) -> None:
        self.fd = os.pidfd_open(pid)

    def fileno(self) -> int:
        return self.fd

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def exit_watch_install() -> None:
    """Make Airflow's task supervisor wake up when its task process exits (see the module
    docstring), not ``min_heartbeat_interval`` later. Without ``os.pidfd_open`` (not Linux)
    it changes nothing."""
    from airflow.sdk.execution_time.supervisor import ActivitySubprocess

    if not hasattr(os, "pidfd_open") or getattr(ActivitySubprocess, "_exit_watched", False):
        return
    register = ActivitySubprocess._register_pipe_readers

    def _register_pipe_readers(self: Any, *args: Any, **kwargs: Any) -> None:
        register(self, *args, **kwargs)
        try:
            watch = _ExitWatch(self.pid)
        except OSError:  # gone already: the supervisor's own check finds it
            return

        def exited(_: object) -> bool:
            return False  # read once: the selector then closes it, the exit is checked next

        def unwatch(_: object) -> None:
            self.selector.unregister(watch)

        self.selector.register(watch, selectors.EVENT_READ, (exited, unwatch))

    ActivitySubprocess._register_pipe_readers = _register_pipe_readers  # type: ignore[method-assign]
    ActivitySubprocess._exit_watched = True  # type: ignore[attr-defined]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
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
    exit_watch_install()
    BaseExecutor.run_workload(workload, subprocess_logs_to_stdout=False)


if __name__ == "__main__":
    main()
