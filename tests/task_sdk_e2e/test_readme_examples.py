"""The README's "Write a task" examples, run as written against a live server.

The producer (``tasks/orders.py``) and the consumer (``tasks/report_orders.py``) code blocks
are taken from the README verbatim, declared in a manifest, run through the CLI, and the
consumer runs in the asset-triggered run the scheduler made from the producer's event.
"""

from __future__ import annotations

import re

import pytest
import yaml

from assets_app.models import AssetEvent, XCom
from assets_app.services.dag_runs import task_instance_create
from assets_app.services.dags import dags_declare
from assets_app.services.manifest import manifest_parse
from assets_app.services.scheduler import scheduler_pass
from assets_app.services.task_instances import task_instances_claim
from tests.live_server import REPO
from tests.task_sdk_e2e.test_task_sdk_e2e import run_task_instance

pytestmark = pytest.mark.slow

MANIFEST = """
dags:
  - dag_id: orders
    tasks:
      - task_id: export_orders
        outlets:
          - {asset: {name: orders, uri: "s3://warehouse/orders"}}
          - {alias: daily-exports}
          - {asset_ref: {name: customers}}
  - dag_id: customers
    tasks:
      - task_id: load_customers
        outlets: [{asset: {name: customers, uri: "s3://warehouse/customers"}}]
  - dag_id: orders_report
    schedule: {asset: {name: orders, uri: "s3://warehouse/orders"}}
    tasks:
      - task_id: report_orders
        inlets: [{asset: {name: orders, uri: "s3://warehouse/orders"}}]
"""


def readme_block(first_line: str) -> str:
    """The README's ```python block that starts with ``first_line``."""
    readme = (REPO / "README.md").read_text()
    match = re.search(rf"```python\n({re.escape(first_line)}\n.*?)```", readme, re.DOTALL)
    assert match, f"no python block starting with {first_line!r} in the README"
    return match.group(1)


def test_write_a_task_examples_run_as_written(server, transactional_db, tmp_path):
    dags_declare(manifest=manifest_parse(yaml.safe_load(MANIFEST)), fileloc="readme.yaml")
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "orders.py").write_text(readme_block("# tasks/orders.py"))
    (tasks / "report_orders.py").write_text(readme_block("# tasks/report_orders.py"))

    producer = task_instance_create(
        dag_id="orders", task_id="export_orders", run_id="manual__2025-01-01"
    ).task_instance
    produced = run_task_instance(server.url, producer, f"{tasks / 'orders.py'}:export_orders")
    assert produced.process.returncode == 0, produced.process.stderr
    events = {e.asset.name: e for e in AssetEvent.objects.select_related("asset")}
    assert events["orders"].extra == {"rows": 1234}
    assert events["customers"].extra == {"touched": True}
    assert events["s3://warehouse/exports/manual__2025-01-01"].extra == {"rows": 1234}

    [run] = [r for r in scheduler_pass().created if r.dag_id == "orders_report"]
    (consumer,) = task_instances_claim(limit=1)  # as the worker does
    assert (consumer.dag_id, consumer.run_id) == ("orders_report", run.run_id)
    consumed = run_task_instance(
        server.url, consumer, f"{tasks / 'report_orders.py'}:report_orders"
    )

    assert consumed.process.returncode == 0, consumed.process.stderr
    assert consumed.ti.state == "success"
    log = consumed.process.stderr
    assert "[stdout] triggered by orders/manual__2025-01-01: {'rows': 1234}" in log
    orders_event = events["orders"]
    assert (
        f"[stdout] latest: event {orders_event.pk} at {orders_event.timestamp.isoformat()}, "
        "{'rows': 1234}"
    ) in log
    xcom = XCom.objects.get(run_id=run.run_id, task_id="report_orders", key="return_value")
    assert xcom.value == {"orders_events": 1}
