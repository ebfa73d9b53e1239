"""A real Airflow 3 DAG file, run task by task by the real task SDK supervisor against the
registry in ``tests/executionapi/test_real_worker.py``.

Keep it in step with the manifest that test declares (same DAG id, task ids and outlets).
"""

from __future__ import annotations

import time

from airflow.sdk import DAG, Asset, AssetAlias, task

PRODUCED = Asset(name="worker_asset", uri="s3://registry-tests/worker/produced")
DYNAMIC = Asset(
    name="worker_dynamic", uri="s3://registry-tests/worker/dynamic", extra={"kind": "dynamic"}
)
ALIAS = AssetAlias(name="worker_alias")

with DAG(dag_id="registry_worker_producer", schedule=None, catchup=False):

    @task(outlets=[PRODUCED])
    def produce(*, outlet_events=None):
        # long enough for the supervisor to heartbeat once (min_heartbeat_interval=1 in the test)
        time.sleep(1.5)
        outlet_events[PRODUCED].extra["rows"] = 3
        outlet_events[PRODUCED].extra["source"] = "real-worker"
        return {"rows": 3}

    @task(outlets=[ALIAS])
    def produce_through_alias(*, outlet_events=None):
        outlet_events[ALIAS].add(DYNAMIC, extra={"via": "alias"})

    @task(inlets=[PRODUCED])
    def read_inlet_events(*, inlet_events=None):
        # GET /execution/asset-events/by-asset: what the first task just registered
        return [event.extra for event in inlet_events[PRODUCED]]

    produce() >> produce_through_alias() >> read_inlet_events()
