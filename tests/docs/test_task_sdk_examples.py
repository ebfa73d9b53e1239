"""The "Write a task" walkthrough of ``docs/task-sdk.md``, run as written against a live server.

The manifest (``my_dags.yaml``), the producer (``tasks/orders.py``) and the consumer
(``tasks/report_orders.py``) are the page's code blocks verbatim, laid out as the page
says (the manifest next to ``tasks/``). ``declare_dags`` loads the manifest without a
warning, the producer runs through the ``task_sdk`` CLI, and the consumer runs in the
asset-triggered run the scheduler made from the producer's event, started by
``manage.py worker --once`` from the manifest's ``callable``.
"""

from __future__ import annotations

import io
import subprocess
import sys

import pytest
from django.core.management import call_command

from assets_app.models import AssetEvent, TaskInstance, XCom
from assets_app.services.runs.dag_runs import task_instance_create
from assets_app.services.scheduling.scheduler import scheduler_pass
from tests.docs.examples import doc_block
from tests.live_server import REPO, server_env
from tests.task_sdk_e2e.test_task_sdk_e2e import run_task_instance

pytestmark = pytest.mark.slow


def test_write_a_task_examples_run_as_written(server, transactional_db, tmp_path):
    # given the page's files, laid out as it says
    (tmp_path / "my_dags.yaml").write_text(doc_block("yaml", "# my_dags.yaml"))
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "orders.py").write_text(doc_block("python", "# tasks/orders.py"))
    (tasks / "report_orders.py").write_text(doc_block("python", "# tasks/report_orders.py"))

    # when the manifest is declared: complete, so no reference is left unmatched
    out, err = io.StringIO(), io.StringIO()
    call_command("declare_dags", str(tmp_path / "my_dags.yaml"), stdout=out, stderr=err)
    assert "Declared 3 DAG(s)" in out.getvalue()
    assert err.getvalue() == ""

    # and the producer runs through the CLI, as "Run it against a server" shows
    producer = task_instance_create(
        dag_id="orders", task_id="export_orders", run_id="manual__2025-01-01"
    ).task_instance
    produced = run_task_instance(server.url, producer, f"{tasks / 'orders.py'}:export_orders")
    assert produced.process.returncode == 0, produced.process.stderr
    events = {e.asset.name: e for e in AssetEvent.objects.select_related("asset")}
    assert events["orders"].extra == {"rows": 1234}
    assert events["customers"].extra == {"touched": True}
    assert events["s3://warehouse/exports/manual__2025-01-01"].extra == {"rows": 1234}

    # and the scheduler makes the consumer's run, which the worker runs
    [run] = [r for r in scheduler_pass().created if r.dag_id == "orders_report"]
    logs = tmp_path / "task_logs"
    worker = subprocess.run(
        [
            *(sys.executable, "manage.py", "worker", "--once", "--server", server.url),
            *("--log-dir", str(logs)),
        ],
        cwd=REPO,
        env=server_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    # then the consumer succeeded, reading the producer's event
    assert worker.returncode == 0, worker.stdout + worker.stderr
    consumer = TaskInstance.objects.get(dag_id="orders_report", run_id=run.run_id)
    assert consumer.state == "success", worker.stdout
    assert consumer.dag_run.state == "success"
    assert f"finished orders_report.report_orders @ {run.run_id} try 1: success" in worker.stdout
    log = (logs / "orders_report" / run.run_id / "report_orders" / "attempt=1.log").read_text()
    assert "[stdout] triggered by orders/manual__2025-01-01: {'rows': 1234}" in log
    orders_event = events["orders"]
    assert (
        f"[stdout] latest: event {orders_event.pk} at {orders_event.timestamp.isoformat()}, "
        "{'rows': 1234}"
    ) in log
    xcom = XCom.objects.get(run_id=run.run_id, task_id="report_orders", key="return_value")
    assert xcom.value == {"orders_events": 1}
