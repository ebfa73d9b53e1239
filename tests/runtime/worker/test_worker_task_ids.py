"""A ``task_sdk`` task whose function name is not its task id (issue 41 item 3), and the
reason every failed try keeps (item 7), through ``manage.py worker`` against a live server."""

from __future__ import annotations

import pytest

from assets_app.models import AssetEvent, TaskInstance, XCom
from tests.runtime.worker.conftest import TASKS, declare, scheduled_task_instances

pytestmark = pytest.mark.slow

STEP_OUTPUT = {"name": "step_output", "uri": "s3://registry-tests/step/output.parquet"}


def test_a_callable_named_otherwise_keeps_its_xcom_and_event_under_the_task_id(
    start_worker, marker_dir
):
    # given a manifest task t1 whose callable is the function `step`
    declare(
        [
            {
                "dag_id": "orders_nightly_export",
                "tags": ["orders", "nightly"],
                "tasks": [
                    {
                        "task_id": "t1",
                        "callable": f"{TASKS}:step",
                        "outlets": [{"asset": STEP_OUTPUT}],
                    }
                ],
            }
        ]
    )
    (ti,) = scheduled_task_instances("orders_nightly_export", "t1", 1)

    worker = start_worker("--once")

    # then it succeeded: its return value is t1's XCom, its event comes from t1
    assert worker.wait() == 0, worker.output()
    ti.refresh_from_db()
    assert ti.state == "success", worker.output()
    xcom = XCom.objects.get(dag_run_id=ti.dag_run_id)
    assert (xcom.task_id, xcom.key, xcom.value) == ("t1", "return_value", {"rows": 3})
    event = AssetEvent.objects.get()
    assert (event.source_task_id, event.extra) == ("t1", {"rows": 3})
    assert (marker_dir / str(ti.pk)).read_text() == "stepped"


def test_a_failed_try_keeps_the_exception_as_its_failure_reason(start_worker):
    declare(
        [
            {
                "dag_id": "orders_load",
                "tasks": [{"task_id": "load", "callable": f"{TASKS}:fails_with_a_reason"}],
            }
        ]
    )
    (ti,) = scheduled_task_instances("orders_load", "load", 1)

    worker = start_worker("--once")

    assert worker.wait() == 0, worker.output()
    failed = TaskInstance.objects.get(pk=ti.pk)
    assert failed.state == "failed", worker.output()
    assert "ValueError: the input file orders.csv has no header row" in failed.failure_reason
