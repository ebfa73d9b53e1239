"""Task functions the end-to-end tests run through the CLI → supervisor → HTTP → server path."""

import os
import signal

from task_sdk import Asset, AssetAlias, task

ORDERS = Asset("orders", "s3://e2e/orders")
EXISTING = Asset("existing", "s3://e2e/existing")
ALIAS = AssetAlias("e2e-alias")
BY_NAME = Asset.ref(name="by_name")


@task(outlets=[ORDERS])
def asset_with_extra(outlet_events):
    print("producing orders")
    outlet_events[ORDERS].extra["rows"] = 42


@task(outlets=[ALIAS])
def alias_two_assets(outlet_events):
    outlet_events[ALIAS].add(EXISTING, extra={"via": "alias"})
    outlet_events[ALIAS].add(
        Asset("brand_new", "s3://e2e/brand-new", extra={"created": "by alias"}),
        extra={"via": "alias"},
    )


@task(outlets=[ORDERS, ALIAS, BY_NAME])
def mixed(outlet_events):
    outlet_events[ORDERS].extra["kind"] = "direct"
    outlet_events[ALIAS].add(Asset("aliased", "s3://e2e/aliased"), extra={"kind": "alias"})
    outlet_events[BY_NAME].extra["kind"] = "name ref"


@task(outlets=[ORDERS])
def raises(outlet_events):
    outlet_events[ORDERS].extra["never"] = "sent"
    raise RuntimeError("the task broke")


@task(outlets=[ORDERS])
def killed(outlet_events):
    outlet_events[ORDERS].extra["never"] = "sent"
    os.kill(os.getpid(), signal.SIGKILL)


@task(outlets=[ORDERS])
def returns_value():
    return {"answer": 42, "run": "manual__2026-01-01T00:00:00+00:00"}


@task(outlets=[ORDERS])
def nan_extra(outlet_events):
    outlet_events[ORDERS].extra["rows"] = 42
    outlet_events[ORDERS].extra["ratio"] = float("nan")


@task(inlets=[ORDERS, ALIAS])
def consume(*, inlet_events, triggering_asset_events):
    """Reads the events the producers recorded and returns what it saw (stored as XCom)."""
    history = inlet_events[ORDERS]
    newest = history[-1]
    triggering = triggering_asset_events[ORDERS]
    return {
        "newest": [newest.id, newest.source_run_id, newest.extra],
        "history": [[e.id, e.source_run_id, e.source_task_id] for e in history],
        "through_alias": sorted(e.asset.name for e in inlet_events[ALIAS]),
        "triggering": [
            [e.source_dag_id, e.source_run_id, e.asset.uri, e.extra] for e in triggering
        ],
        "timestamps_aware": all(e.timestamp.tzinfo is not None for e in [*history, *triggering]),
        "triggering_keys": sorted(key.name for key in triggering_asset_events),
    }
