"""Run by test_real_client.py in a subprocess: drives the live server with the real
``apache-airflow-task-sdk`` HTTP client, printing what came back as one JSON line."""

from __future__ import annotations

import json
import os
import sys
import uuid
from datetime import UTC, datetime

from airflow.sdk.api.client import Client
from airflow.sdk.api.datamodels._generated import AssetProfile
from airflow.sdk.exceptions import TaskAlreadyRunningError


def main() -> None:
    base_url, token, ti_id, dag_id, run_id, task_id = sys.argv[1:7]
    ti = uuid.UUID(ti_id)
    out: dict = {}
    with Client(base_url=base_url, token=token) as client:
        context = client.task_instances.start(ti, os.getpid(), datetime.now(tz=UTC))
        out["run_id"] = context.dag_run.run_id
        out["max_tries"] = context.max_tries
        try:
            client.task_instances.start(ti, os.getpid() + 1, datetime.now(tz=UTC))
        except TaskAlreadyRunningError:
            out["already_running"] = True
        client.task_instances.heartbeat(ti, os.getpid())
        client.task_instances.set_rtif(ti, {"op_kwargs": "{}"})
        out["inactive"] = client.task_instances.validate_inlets_and_outlets(ti).inactive_assets
        out["asset"] = client.assets.get(name="asset_one").model_dump()
        client.xcoms.set(dag_id, run_id, task_id, "return_value", {"answer": 42})
        out["xcom"] = client.xcoms.get(dag_id, run_id, task_id, "return_value").value
        succeed = {
            "task_outlets": [
                AssetProfile(name="asset_one", uri="s3://bucket/one", type="Asset"),
                AssetProfile(name="my_alias", type="AssetAlias"),
            ],
            "outlet_events": [
                {
                    "dest_asset_key": {"name": "asset_one", "uri": "s3://bucket/one"},
                    "extra": {"k": "v"},
                },
                {
                    "source_alias_name": "my_alias",
                    "dest_asset_key": {"name": "dyn_asset", "uri": "s3://bucket/dyn"},
                    "dest_asset_extra": {"asset_level": "x"},
                    "extra": {"from": "alias"},
                },
            ],
            "rendered_map_index": None,
        }
        client.task_instances.succeed(ti, datetime.now(tz=UTC), **succeed)
        # the supervisor resends an identical success once when the first attempt failed
        client.task_instances.succeed(ti, datetime.now(tz=UTC), **succeed)
        events = client.asset_events.get(name="asset_one")
        out["events"] = [event.extra for event in events.asset_events]
        alias_events = client.asset_events.get(alias_name="my_alias")
        out["alias_events"] = [event.asset.name for event in alias_events.asset_events]
    sys.stdout.write(json.dumps(out, default=str) + "\n")


if __name__ == "__main__":
    main()
