"""The two consumer tasks of the seed's example DAGs (Airflow's ``example_asset_alias.py``),
written with ``task_sdk``. The scheduler makes their asset-triggered runs from the producers'
events; ``manage.py worker`` runs them (``callable:`` in ``examples/dags.yaml``).

Each logs the events that triggered its run (``triggering_asset_events``, from the run
context) and the newest event of its inlet (``inlet_events``, read from the server).
"""

from task_sdk import (
    Asset,
    AssetAlias,
    AssetEvent,
    InletEventsAccessors,
    TriggeringAssetEventsAccessor,
    task,
)

BUCKET = Asset("s3://bucket/my-task")
ALIAS = AssetAlias("example-alias")


def _asset_uri(event: AssetEvent) -> str:
    return event.asset.uri if event.asset else "a deleted asset"


def _describe(event: AssetEvent) -> str:
    aliases = ", ".join(alias.name for alias in event.source_aliases or ()) or "none"
    return (
        f"{_asset_uri(event)} from {event.source_dag_id}.{event.source_task_id} "
        f"@ {event.source_run_id} at {event.timestamp.isoformat()} "
        f"(extra {event.extra}, source aliases: {aliases})"
    )


def _consume(
    inlet: Asset | AssetAlias,
    triggering_asset_events: TriggeringAssetEventsAccessor,
    inlet_events: InletEventsAccessors,
) -> AssetEvent:
    """Log the events of ``inlet`` that triggered this run; return its newest event."""
    for event in triggering_asset_events.get(inlet, []):
        print(f"consumed {_describe(event)}")
    return inlet_events[inlet][-1]


@task(inlets=[BUCKET])
def consume_asset_events(
    *,
    triggering_asset_events: TriggeringAssetEventsAccessor,
    inlet_events: InletEventsAccessors,
) -> None:
    """DAG ``asset_s3_bucket_consumer``, scheduled on ``s3://bucket/my-task``."""
    latest = _consume(BUCKET, triggering_asset_events, inlet_events)
    print(f"newest event on {BUCKET.uri}: #{latest.id} from {latest.source_dag_id}")


@task(inlets=[ALIAS])
def consume_asset_alias_events(
    *,
    triggering_asset_events: TriggeringAssetEventsAccessor,
    inlet_events: InletEventsAccessors,
) -> None:
    """DAG ``asset_alias_example_alias_consumer``, scheduled on the alias ``example-alias``."""
    latest = _consume(ALIAS, triggering_asset_events, inlet_events)
    print(f"newest event through {ALIAS.name}: #{latest.id} on {_asset_uri(latest)}")
