"""Run by test_real_client_routes.py in a subprocess: the real SDK client calls the XCom
sequence, DAG run, DAG, task-instance query and health routes, printing what its own models
made of each answer as one JSON line.

Usage: ``real_client_routes_script.py BASE_URL TOKEN``; the data is the test's (DAG
``target``, runs ``r0``/``r1``, the ``mapped`` XComs of ``seq``'s run ``s1``).
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime

from airflow.sdk.api.client import Client, ServerResponseError
from airflow.sdk.execution_time.comms import ErrorResponse

JAN_1 = datetime(2026, 1, 1, tzinfo=UTC)
JAN_9 = datetime(2026, 1, 9, tzinfo=UTC)


def main() -> None:
    base_url, token = sys.argv[1:3]
    out: dict = {}
    with Client(base_url=base_url, token=token) as client:
        xcoms = client.xcoms
        out["slice_all"] = xcoms.get_sequence_slice(
            "seq", "s1", "mapped", "return_value", None, None, None
        ).root
        out["slice_tail"] = xcoms.get_sequence_slice(
            "seq", "s1", "mapped", "return_value", -2, None, None
        ).root
        out["slice_step"] = xcoms.get_sequence_slice(
            "seq", "s1", "mapped", "return_value", None, None, -2
        ).root
        out["item_last"] = xcoms.get_sequence_item("seq", "s1", "mapped", "return_value", -1).root
        missing = xcoms.get_sequence_item("seq", "s1", "mapped", "return_value", 99)
        out["item_missing"] = missing.error.value if isinstance(missing, ErrorResponse) else None

        runs = client.dag_runs
        out["trigger"] = runs.trigger(
            "target", "manual__from_task", conf={"a": 1}, logical_date=JAN_9
        ).model_dump(mode="json")
        again = runs.trigger("target", "manual__from_task")
        out["trigger_again"] = again.error.value if isinstance(again, ErrorResponse) else None
        out["trigger_reset"] = runs.trigger("target", "r0", reset_dag_run=True).model_dump(
            mode="json"
        )
        detail = runs.get_detail("target", "manual__from_task")
        out["detail"] = detail.model_dump(mode="json")
        out["state"] = runs.get_state("target", "r1").state.value
        out["count_running"] = runs.get_count("target", states=["running"]).count
        out["count_runs"] = runs.get_count("target", run_ids=["r0", "r1", "nope"]).count
        previous = runs.get_previous("target", logical_date=JAN_9)
        out["previous_run"] = previous.dag_run.run_id if previous.dag_run else None
        out["previous_none"] = runs.get_previous("target", logical_date=JAN_1).dag_run
        try:
            runs.get_state("target", "nope")
        except ServerResponseError as exc:
            out["state_missing"] = [exc.response.status_code, exc.detail]

        out["dag"] = client.dags.get("target").model_dump(mode="json")

        tis = client.task_instances
        out["ti_count"] = tis.get_count("target", task_ids=["a"], states=["success"]).count
        out["ti_count_group"] = tis.get_count("target", task_group_id="grp").count
        out["ti_states"] = tis.get_task_states("target", run_ids=["r1"]).task_states
        previous_ti = tis.get_previous("target", "a", logical_date=JAN_9, state="success")
        out["previous_ti"] = previous_ti.task_instance.model_dump(mode="json")
        out["breadcrumbs"] = list(tis.get_task_breakcrumbs("target", "r1").breadcrumbs)

        health = client.get("health")
        out["health"] = [health.status_code, health.json()]
        out["version_header"] = health.headers.get("Airflow-API-Version")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
