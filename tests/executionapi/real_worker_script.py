"""Run by test_real_worker.py in a subprocess: the real Airflow task SDK supervisor runs task
instances of a real DAG file against the live registry, one after the other.

Usage: ``real_worker_script.py SPEC.json`` where the spec is
``{"server": "http://host:port/execution/", "bundle": "<bundle name>",
"dag_rel_path": "<file, relative to the bundle>", "log_dir": "<dir>",
"task_instances": [{"id", "token", "dag_id", "task_id", "run_id", "try_number", "map_index"}]}``.
The bundle itself comes from Airflow's configuration (``[dag_processor]
dag_bundle_config_list`` or ``[core] dags_folder``). Prints one JSON line: the exit code of
each supervised task in order.
"""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path

from airflow.sdk.api.datamodels._generated import BundleInfo, TaskInstance
from airflow.sdk.execution_time.supervisor import supervise_task


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    results = []
    for item in spec["task_instances"]:
        ti = TaskInstance(
            id=uuid.UUID(item["id"]),
            dag_id=item["dag_id"],
            task_id=item["task_id"],
            run_id=item["run_id"],
            try_number=item.get("try_number", 1),
            map_index=item.get("map_index", -1),
            # the worker only passes this through; the registry does not version DAGs
            dag_version_id=uuid.uuid4(),
        )
        exit_code = supervise_task(
            ti=ti,
            bundle_info=BundleInfo(name=spec["bundle"]),
            dag_rel_path=spec["dag_rel_path"],
            token=item["token"],
            server=spec["server"],
            dry_run=False,
            log_path=str(Path(spec["log_dir"]) / f"{item['task_id']}.log"),
            subprocess_logs_to_stdout=False,
        )
        results.append({"task_id": item["task_id"], "exit_code": exit_code})
    sys.stdout.write(json.dumps(results) + "\n")


if __name__ == "__main__":
    main()
