"""``manage.py demo`` runs the seed scenario through a live server and reports it."""

from io import StringIO

import pytest
from django.core.management import call_command

from assets_app.models import (
    AssetAliasAssetEvent,
    AssetDagRunQueue,
    AssetEvent,
    DagRun,
    TaskInstance,
)

pytestmark = pytest.mark.slow


def test_demo_records_the_seed_scenario(transactional_db):
    out = StringIO()
    call_command("demo", stdout=out)
    text = out.getvalue()

    assert TaskInstance.objects.filter(state="success").count() == 2
    direct, through_alias = AssetEvent.objects.select_related("asset").order_by("id")
    assert direct.asset.uri == through_alias.asset.uri == "s3://bucket/my-task"
    assert direct.source_dag_id == "asset_s3_bucket_producer"
    assert not AssetAliasAssetEvent.objects.filter(event=direct).exists()
    assert AssetAliasAssetEvent.objects.get(event=through_alias).alias.name == "example-alias"
    # both consumers were queued, then the demo's scheduler pass turned them into runs
    assert not AssetDagRunQueue.objects.exists()
    runs = {run.dag_id: run for run in DagRun.objects.filter(run_type="asset_triggered")}
    assert set(runs) == {"asset_s3_bucket_consumer", "asset_alias_example_alias_consumer"}
    consumed = {dag_id: set(run.consumed_events.all()) for dag_id, run in runs.items()}
    assert consumed["asset_s3_bucket_consumer"] == {direct, through_alias}
    assert consumed["asset_alias_example_alias_consumer"] == {through_alias}
    assert TaskInstance.objects.filter(dag_run__in=runs.values(), state="scheduled").count() == 2
    assert "example-alias → s3://bucket/my-task" in text
    assert "source aliases: example-alias" in text
    assert "asset_s3_bucket_consumer waits on s3://bucket/my-task" in text
    assert "created asset_alias_example_alias_consumer asset_triggered__" in text
