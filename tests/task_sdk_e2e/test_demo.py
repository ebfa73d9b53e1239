"""``manage.py demo`` runs the seed scenario through a live server and reports it: producers →
events → scheduler → the worker runs the consumers, which read the events that triggered them."""

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

    # the two producers and, run by the worker, the two consumers
    assert TaskInstance.objects.filter(state="success").count() == 4
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
    assert TaskInstance.objects.filter(dag_run__in=runs.values(), state="success").count() == 2
    # and the consumers' runs ended success
    runs_now = DagRun.objects.filter(pk__in=[run.pk for run in runs.values()])
    assert {run.state for run in runs_now} == {"success"}
    assert all(run.end_date for run in runs_now)
    assert "example-alias → s3://bucket/my-task" in text
    assert "source aliases: example-alias" in text
    assert "asset_s3_bucket_consumer waits on s3://bucket/my-task" in text
    assert "created asset_alias_example_alias_consumer asset_triggered__" in text
    # the consumers' logs name the events they consumed, and the chain shows them per run
    run_id = direct.source_run_id
    by_bucket = (
        f"s3://bucket/my-task from asset_s3_bucket_producer.produce_asset_events @ {run_id} "
        f"at {direct.timestamp.isoformat()} (extra {{}}, source aliases: none)"
    )
    by_alias = (
        "s3://bucket/my-task from asset_alias_example_alias_producer."
        f"produce_asset_events_through_asset_alias @ {run_id} "
        f"at {through_alias.timestamp.isoformat()} (extra {{}}, source aliases: example-alias)"
    )
    assert f"| consumed {by_bucket}" in text
    assert f"| consumed {by_alias}" in text
    bucket_run = runs["asset_s3_bucket_consumer"].run_id
    assert f"    → asset_s3_bucket_consumer {bucket_run} (run success)" in text
    assert (
        "    → consume_asset_events: success; it read 2 event(s):\n"
        f"        {by_bucket}\n        {by_alias}\n"
    ) in text
    assert (
        f"    → consume_asset_alias_events: success; it read 1 event(s):\n        {by_alias}\n"
    ) in text
    assert f"newest event through example-alias: #{through_alias.pk} on s3://bucket/my-task" in text
