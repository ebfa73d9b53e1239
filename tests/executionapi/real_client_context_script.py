"""Run by test_real_client_context.py in a subprocess: the real SDK client reads the routes
a task's context and a reschedule-mode sensor need, printing what came back as JSON."""

from __future__ import annotations

import json
import sys
import uuid
from datetime import UTC, datetime, timedelta

from airflow.sdk.api.client import Client
from airflow.sdk.execution_time.comms import RescheduleTask


def main() -> None:
    base_url, token, ti_id = sys.argv[1:4]
    ti = uuid.UUID(ti_id)
    out: dict = {}
    with Client(base_url=base_url, token=token) as client:
        by_alias = client.assets.get_by_alias("my_alias")
        out["alias_assets"] = [asset.name for asset in by_alias.assets]
        prev = client.task_instances.get_previous_successful_dagrun(ti)
        out["prev_end"] = prev.end_date.isoformat() if prev.end_date else None
        out["first_start"] = client.task_instances.get_reschedule_start_date(ti).start_date
        now = datetime.now(tz=UTC)
        poke = RescheduleTask(reschedule_date=now + timedelta(seconds=5), end_date=now)
        client.task_instances.reschedule(ti, poke)
        start = client.task_instances.get_reschedule_start_date(ti).start_date
        out["first_start_after"] = start.isoformat() if start else None
    print(json.dumps(out))


if __name__ == "__main__":
    main()
