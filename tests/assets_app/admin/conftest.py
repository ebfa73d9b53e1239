"""The seed scenario the admin pages are looked at with."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from assets_app.models import (
    Asset,
    AssetAlias,
    AssetAliasAsset,
    AssetAliasAssetEvent,
    AssetDagRunQueue,
    AssetEvent,
    Dag,
    DagRunAssetEvent,
    EventLog,
)
from assets_app.services.audit import Actor
from assets_app.services.dags.declare import dags_set_paused
from tests.assets_app.admin import EXAMPLE
from tests.factories import AssetEventFactory, AssetFactory, DagRunFactory, TaskInstanceFactory


@pytest.fixture
def world(db) -> dict[str, object]:
    """The seed scenario after one alias producer success and one scheduler pass, plus an
    event whose asset was deleted."""
    call_command("declare_dags", str(EXAMPLE), stdout=None)
    asset = Asset.objects.get(uri="s3://bucket/my-task")
    alias = AssetAlias.objects.get(name="example-alias")
    link = AssetAliasAsset.objects.create(alias=alias, asset=asset)
    producer_ti = TaskInstanceFactory(
        dag_run=DagRunFactory(dag_id="asset_alias_example_alias_producer", run_id="manual__1"),
        task_id="produce_asset_events_through_asset_alias",
        state="success",
    )
    event = AssetEvent.objects.create(
        asset=asset,
        extra={"nested": {"k": [1, 2]}},
        source_dag_id=producer_ti.dag_id,
        source_task_id=producer_ti.task_id,
        source_run_id=producer_ti.run_id,
    )
    alias_event = AssetAliasAssetEvent.objects.create(alias=alias, event=event)
    consumer_run = DagRunFactory(
        dag_id="asset_alias_example_alias_consumer",
        run_id="asset_triggered__1",
        run_type="asset_triggered",
    )
    DagRunAssetEvent.objects.create(dag_run=consumer_run, event=event)
    TaskInstanceFactory(dag_run=consumer_run, task_id="consume_asset_alias_events")
    queue = AssetDagRunQueue.objects.create(
        asset=asset,
        target_dag_id="asset_s3_bucket_consumer",
        created_at=timezone.now() - timedelta(minutes=5),
    )
    doomed = AssetFactory(name="doomed", uri="s3://bucket/doomed")
    orphan = AssetEventFactory(asset=doomed)
    doomed.delete()
    # an operator sent a DAG's pause flag from the admin (as it was): the audit log's row
    dags_set_paused(
        dag_ids=["asset_s3_bucket_consumer"],
        is_paused=Dag.objects.get(dag_id="asset_s3_bucket_consumer").is_paused,
        actor=Actor(name="operator", via="ui", display_name="Operator"),
    )
    return {
        "asset": asset,
        "assetalias": alias,
        "assetaliasasset": link,
        "assetevent": event,
        "orphan": orphan,
        "assetaliasassetevent": alias_event,
        "dag": Dag.objects.get(dag_id="asset_s3_bucket_consumer"),
        "scheduled_dag": Dag.objects.get(dag_id="asset_alias_example_alias_consumer"),
        "dagrun": consumer_run,
        "taskinstance": producer_ti,
        "assetdagrunqueue": queue,
        "eventlog": EventLog.objects.get(event="patch_dag"),
    }
