"""What Airflow itself makes of DAG files: run under an interpreter with Airflow by
``test_dag_files.py``, it loads each file with Airflow's ``DagBag``, round-trips every DAG
through Airflow's serialization (what Airflow's scheduler works from) and prints its facts as
JSON. Independent of the registry's parser (``runtime/dag_parse.py``) on purpose."""

from __future__ import annotations

import json
import sys
from typing import Any

from airflow.dag_processing.dagbag import DagBag
from airflow.serialization.serialized_objects import DagSerialization


def leaf(obj: Any) -> list[str]:
    kind = type(obj).__name__
    if kind in ("SerializedAsset", "Asset"):
        return ["asset", obj.name, obj.uri]
    if kind in ("SerializedAssetAlias", "AssetAlias"):
        return ["alias", obj.name]
    if "NameRef" in kind:
        return ["asset_ref", "name", obj.name]
    if "UriRef" in kind:
        return ["asset_ref", "uri", obj.uri]
    raise TypeError(kind)


def timetable(tt: Any) -> dict[str, Any]:
    kind = type(tt).__name__
    facts: dict[str, Any] = {"kind": kind, "summary": tt.summary}
    if hasattr(tt, "asset_condition"):
        facts["assets"] = tt.asset_condition.as_expression()
    if kind == "AssetOrTimeSchedule":
        facts["time"] = timetable(tt.timetable)
    elif kind not in ("AssetTriggeredTimetable", "NullTimetable", "OnceTimetable"):
        facts["serialized"] = tt.serialize()
    return facts


def facts(path: str) -> dict[str, Any]:
    bag = DagBag(dag_folder=path)
    dags = {}
    for dag_id, sdk_dag in bag.dags.items():
        dag = DagSerialization.from_dict(DagSerialization.to_dict(sdk_dag))
        dags[dag_id] = {
            "tasks": {
                task.task_id: {
                    "upstream": sorted(task.upstream_task_ids),
                    "trigger_rule": str(task.trigger_rule),
                    "retries": task.retries,
                    "retry_delay": task.retry_delay.total_seconds(),
                    "outlets": [leaf(o) for o in task.outlets],
                    "inlets": [leaf(i) for i in task.inlets],
                }
                for task in dag.task_dict.values()
            },
            "timetable": timetable(dag.timetable),
            "tags": sorted(dag.tags),
            "max_active_runs": dag.max_active_runs,
            "max_active_tasks": dag.max_active_tasks,
            "catchup": dag.catchup,
            "start_date": dag.start_date.isoformat() if dag.start_date else None,
            "end_date": dag.end_date.isoformat() if dag.end_date else None,
            "is_paused_upon_creation": sdk_dag.is_paused_upon_creation,
        }
    return {"dags": dags, "import_errors": dict(bag.import_errors)}


if __name__ == "__main__":  # dagbag_facts.py OUT.json FILE... (Airflow logs on stdout)
    with open(sys.argv[1], "w", encoding="utf-8") as out:
        json.dump({path: facts(path) for path in sys.argv[2:]}, out)
