"""The two producer tasks of the seed's example DAGs (Airflow's ``example_asset_alias.py``),
written with ``task_sdk``. Run one against a server with::

    python -m task_sdk run --server http://127.0.0.1:8000 --ti-id ID --token TOKEN \
        examples/tasks/seed_producers.py:produce_asset_events
"""

import logging

from task_sdk import Asset, AssetAlias, OutletEventAccessors, task

log = logging.getLogger(__name__)


@task(outlets=[Asset("s3://bucket/my-task")])
def produce_asset_events() -> None:
    """DAG ``asset_s3_bucket_producer``: updates the asset; the server records the event."""
    log.info("produced s3://bucket/my-task")


@task(outlets=[AssetAlias("example-alias")])
def produce_asset_events_through_asset_alias(*, outlet_events: OutletEventAccessors) -> None:
    """DAG ``asset_alias_example_alias_producer``: picks the asset at run time."""
    bucket_name = "bucket"
    object_path = "my-task"
    outlet_events[AssetAlias("example-alias")].add(Asset(f"s3://{bucket_name}/{object_path}"))
    log.info("emitted an event for s3://%s/%s through example-alias", bucket_name, object_path)
