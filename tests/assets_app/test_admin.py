"""The Django admin: every page renders, search and filters work, lists stay flat in queries."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from assets_app.models import (
    Asset,
    AssetAlias,
    AssetAliasAsset,
    AssetAliasAssetEvent,
    AssetDagRunQueue,
    AssetEvent,
    Dag,
    DagRun,
    DagRunAssetEvent,
    TaskInstance,
)
from tests.factories import (
    AssetAliasFactory,
    AssetEventFactory,
    AssetFactory,
    DagRunFactory,
    TaskInstanceFactory,
)

pytestmark = pytest.mark.django_db

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "dags.yaml"
MODELS = [
    "asset",
    "assetalias",
    "assetaliasasset",
    "assetevent",
    "assetaliasassetevent",
    "dag",
    "dagrun",
    "taskinstance",
    "assetdagrunqueue",
]


@pytest.fixture
def world() -> dict[str, object]:
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
    }


def changelist(model: str) -> str:
    return reverse(f"admin:assets_app_{model}_changelist")


def change(model: str, pk: object) -> str:
    return reverse(f"admin:assets_app_{model}_change", args=[pk])


@pytest.mark.parametrize("model", MODELS)
def test_changelist_renders(admin_client, world, model):
    response = admin_client.get(changelist(model))
    assert response.status_code == 200


@pytest.mark.parametrize("model", MODELS)
def test_change_page_renders(admin_client, world, model):
    response = admin_client.get(change(model, world[model].pk))
    assert response.status_code == 200


@pytest.mark.parametrize("model", ["asset", "assetalias", "assetaliasasset"])
def test_add_page_renders_for_editable_tables(admin_client, model):
    assert admin_client.get(reverse(f"admin:assets_app_{model}_add")).status_code == 200


@pytest.mark.parametrize(
    "model",
    ["assetevent", "assetaliasassetevent", "dag", "dagrun", "taskinstance", "assetdagrunqueue"],
)
def test_system_written_tables_cannot_be_added(admin_client, model):
    assert admin_client.get(reverse(f"admin:assets_app_{model}_add")).status_code == 403


def test_login_is_required(client):
    response = client.get(changelist("assetevent"))
    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]


def test_asset_event_page_shows_sources_aliases_consumers_and_pretty_extra(admin_client, world):
    # when
    content = admin_client.get(change("assetevent", world["assetevent"].pk)).content.decode()

    # then
    assert "asset_alias_example_alias_producer" in content
    assert "produce_asset_events_through_asset_alias" in content
    assert "manual__1" in content
    assert "example-alias" in content
    assert "asset_triggered__1" in content  # the run the event triggered
    assert "&quot;nested&quot;: {\n" in content  # extra is pretty-printed


def test_event_of_a_deleted_asset_renders(admin_client, world):
    # given
    orphan = world["orphan"]

    # when
    listing = admin_client.get(changelist("assetevent")).content.decode()
    page = admin_client.get(change("assetevent", orphan.pk))

    # then
    assert f"deleted asset #{orphan.asset_id}" in listing
    assert page.status_code == 200
    assert f"deleted asset #{orphan.asset_id}" in page.content.decode()


def test_asset_page_shows_active_flag_aliases_and_latest_events(admin_client, world):
    # when
    content = admin_client.get(change("asset", world["asset"].pk)).content.decode()
    listing = admin_client.get(changelist("asset")).content.decode()

    # then
    assert "example-alias" in content
    assert change("assetevent", world["assetevent"].pk) in content
    assert "asset_s3_bucket_producer.produce_asset_events" in content
    assert 'alt="True"' in listing  # active
    assert "example-alias" in listing


def test_dag_page_shows_expression_and_references(admin_client, world):
    content = admin_client.get(change("dag", world["scheduled_dag"].pk)).content.decode()
    assert "&quot;alias&quot;: {" in content
    assert "schedule: aliases" in content.lower()
    listing = admin_client.get(changelist("dag")).content.decode()
    assert "alias:example-alias" in listing


def test_dag_run_page_shows_consumed_events(admin_client, world):
    content = admin_client.get(change("dagrun", world["dagrun"].pk)).content.decode()
    assert "consumed asset events" in content.lower()
    assert f"event {world['assetevent'].pk}" in content
    assert "consume_asset_alias_events" in content


def test_queue_shows_how_long_rows_waited(admin_client, world):
    content = admin_client.get(changelist("assetdagrunqueue")).content.decode()
    assert re.search(r"[45]m \d\ds", content)


@pytest.mark.parametrize(
    ("model", "params", "expected"),
    [
        pytest.param("assetevent", {"q": "my-task"}, ["assetevent"], id="event-search"),
        pytest.param(
            "assetevent",
            {"source_dag": "asset_alias_example_alias_producer"},
            ["assetevent"],
            id="event-source-dag",
        ),
        pytest.param("assetevent", {"source": "manual"}, [], id="event-manual"),
        pytest.param("assetevent", {"source": "task"}, ["assetevent", "orphan"], id="event-task"),
        pytest.param("assetevent", {"q": "nothing-matches"}, [], id="no-match"),
        pytest.param("asset", {"active": "no"}, [], id="asset-inactive"),
        pytest.param("asset", {"active": "yes", "q": "bucket/my"}, ["asset"], id="asset-search"),
        pytest.param("assetalias", {"q": "example"}, ["assetalias"], id="alias-search"),
        pytest.param(
            "dagrun", {"dag_id": "asset_alias_example_alias_consumer"}, ["dagrun"], id="run-dag"
        ),
        pytest.param("dagrun", {"run_type": "asset_triggered"}, ["dagrun"], id="run-type"),
        pytest.param("taskinstance", {"state": "success"}, ["taskinstance"], id="ti-state"),
        pytest.param(
            "taskinstance",
            {"dag_id": "asset_alias_example_alias_producer"},
            ["taskinstance"],
            id="ti-dag",
        ),
        pytest.param("dag", {"scheduled": "yes", "q": "s3"}, ["dag"], id="dag-scheduled"),
        pytest.param("assetdagrunqueue", {"q": "my-task"}, ["assetdagrunqueue"], id="queue-search"),
        pytest.param(
            "assetdagrunqueue",
            {"target_dag": "asset_s3_bucket_consumer"},
            ["assetdagrunqueue"],
            id="queue-dag",
        ),
        pytest.param("assetaliasasset", {"q": "example"}, ["assetaliasasset"], id="mapping-search"),
        pytest.param(
            "assetaliasassetevent",
            {"q": "my-task"},
            ["assetaliasassetevent"],
            id="alias-event-search",
        ),
    ],
)
def test_search_and_filters(admin_client, world, model, params, expected):
    # when
    response = admin_client.get(changelist(model), params)

    # then
    assert response.status_code == 200
    found = {row.pk for row in response.context["cl"].result_list}
    assert found == {world[name].pk for name in expected}


def test_event_filters_by_time_and_alias(admin_client, world):
    alias_id = world["assetalias"].pk
    since = (timezone.now() - timedelta(days=1)).isoformat()
    response = admin_client.get(
        changelist("assetevent"), {"source_alias": alias_id, "timestamp__gte": since}
    )
    assert response.status_code == 200
    assert list(response.context["cl"].result_list) == [world["assetevent"]]


def _search_world() -> None:
    """Events whose asset names, uris, DAG ids and run ids overlap in case and substrings."""
    orders = AssetFactory(name="Orders", uri="s3://Lake/orders")
    customers = AssetFactory(name="customers", uri="s3://lake/CUSTOMERS")
    gone = AssetFactory(name="gone-orders", uri="s3://lake/gone")
    AssetEventFactory(asset=orders, source_dag_id="ETL", source_run_id="manual__1")
    AssetEventFactory(asset=orders, source_dag_id="load", source_run_id="ORDERS")
    AssetEventFactory(asset=customers, source_dag_id="etl", source_run_id="run_2")
    AssetEventFactory(asset=customers, source_dag_id=None, source_task_id=None, source_run_id=None)
    AssetEventFactory(asset=gone, source_dag_id="lake", source_run_id="x")
    gone.delete()  # its event stays, with a dangling asset_id


@pytest.mark.parametrize("max_asset_ids", [1000, 1], ids=["id-list", "subquery"])
@pytest.mark.parametrize(
    "term",
    [
        "orders",
        "ORDERS",
        "etl",
        "Etl",
        "lake",
        "s3://lake",
        "manual__1",
        "manual",
        "orders etl",
        '"s3://lake/orders"',
        "customers run_2",
        "gone",
        "nothing",
        "  ",
    ],
)
def test_event_search_matches_what_search_fields_would(
    admin_client, monkeypatch, term, max_asset_ids
):
    from django.contrib import admin as django_admin
    from django.contrib.admin import ModelAdmin
    from django.test import RequestFactory

    from assets_app import admin as registry_admin

    # given
    _search_world()
    monkeypatch.setattr(registry_admin, "SEARCH_MAX_ASSET_IDS", max_asset_ids)
    model_admin = django_admin.site._registry[AssetEvent]
    request = RequestFactory().get("/")
    events = AssetEvent.objects.all()

    # when
    found, duplicates = model_admin.get_search_results(request, events, term)
    expected, _ = ModelAdmin.get_search_results(model_admin, request, events, term)

    # then the indexed search finds exactly what Django's search over search_fields finds
    assert duplicates is False
    assert sorted(found.values_list("pk", flat=True)) == sorted(
        expected.values_list("pk", flat=True)
    )


def test_event_search_through_the_changelist(admin_client):
    # given
    _search_world()

    # when
    response = admin_client.get(changelist("assetevent"), {"q": "etl"})

    # then
    assert response.status_code == 200
    assert {event.source_dag_id for event in response.context["cl"].result_list} == {"ETL", "etl"}


def test_event_source_alias_filter_lists_an_event_once(admin_client):
    # given an event emitted through two aliases, and one through neither
    first, second = AssetAliasFactory(), AssetAliasFactory()
    event = AssetEventFactory()
    AssetEventFactory()
    AssetAliasAssetEvent.objects.create(alias=first, event=event)
    AssetAliasAssetEvent.objects.create(alias=second, event=event)

    # when
    response = admin_client.get(changelist("assetevent"), {"source_alias": first.pk})

    # then
    assert response.status_code == 200
    assert list(response.context["cl"].result_list) == [event]


def test_task_instance_search_by_id(admin_client, world):
    ti = world["taskinstance"]
    response = admin_client.get(changelist("taskinstance"), {"q": str(ti.pk)})
    assert list(response.context["cl"].result_list) == [ti]


def test_events_link_from_asset_filters_the_event_list(admin_client, world):
    response = admin_client.get(changelist("assetevent"), {"asset__id__exact": world["asset"].pk})
    assert list(response.context["cl"].result_list) == [world["assetevent"]]


def test_pause_action_goes_through_the_service(admin_client, world):
    # when
    response = admin_client.post(
        changelist("dag"),
        {"action": "pause", "_selected_action": ["asset_s3_bucket_consumer"]},
        follow=True,
    )

    # then
    assert response.status_code == 200
    assert Dag.objects.get(dag_id="asset_s3_bucket_consumer").is_paused is True
    assert "Paused 1 DAG(s)." in response.content.decode()


def test_dag_change_form_only_changes_the_pause_flag(admin_client, world):
    # given the inlines' (empty) management forms
    url = change("dag", "asset_s3_bucket_consumer")
    data = {"is_paused": "on", "fileloc": "x"}
    for inline in admin_client.get(url).context["inline_admin_formsets"]:
        prefix = inline.formset.prefix
        data |= {f"{prefix}-TOTAL_FORMS": "0", f"{prefix}-INITIAL_FORMS": "0"}

    # when
    response = admin_client.post(url, data)

    # then
    assert response.status_code == 302
    dag = Dag.objects.get(dag_id="asset_s3_bucket_consumer")
    assert dag.is_paused is True
    assert dag.fileloc == str(EXAMPLE)


# --- query counts ----------------------------------------------------------------------------


def _events_with_links(count: int) -> None:
    alias = AssetAliasFactory()
    run = DagRunFactory()
    for _ in range(count):
        event = AssetEventFactory()
        AssetAliasAssetEvent.objects.create(alias=alias, event=event)
        DagRunAssetEvent.objects.create(dag_run=run, event=event)


def _query_count(client, url: str) -> int:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response.status_code == 200
    return len(queries)


def _assets_with_events(count: int) -> None:
    alias = AssetAliasFactory()
    for _ in range(count):
        asset = AssetFactory()
        AssetEventFactory(asset=asset)
        AssetAliasAsset.objects.create(alias=alias, asset=asset)


def _task_instances(count: int) -> None:
    TaskInstanceFactory.create_batch(count)


@pytest.mark.parametrize(
    ("model", "make"),
    [
        pytest.param("assetevent", _events_with_links, id="events"),
        pytest.param("asset", _assets_with_events, id="assets"),
        pytest.param("taskinstance", _task_instances, id="task-instances"),
        pytest.param("assetaliasassetevent", _events_with_links, id="alias-event-links"),
        pytest.param("dagrun", lambda n: DagRunFactory.create_batch(n), id="runs"),
    ],
)
def test_changelist_query_count_does_not_grow_with_rows(admin_client, model, make):
    # given
    url = changelist(model)
    make(10)
    admin_client.get(url)  # warm caches (content types, session)
    few = _query_count(admin_client, url)

    # when
    make(90)
    many = _query_count(admin_client, url)

    # then
    assert many == few


def test_event_changelist_never_counts_the_whole_table(admin_client, settings):
    # given
    _events_with_links(5)

    # when
    with CaptureQueriesContext(connection) as queries:
        admin_client.get(changelist("assetevent"))

    # then every COUNT on asset_event is bounded by a LIMIT
    counts = [q["sql"] for q in queries if "COUNT(" in q["sql"] and '"asset_event"' in q["sql"]]
    assert counts
    assert all("LIMIT" in sql for sql in counts)


def test_capped_paginator_counts_at_most_its_cap(monkeypatch):
    from assets_app.paginators import CappedCountPaginator

    # given
    monkeypatch.setattr(CappedCountPaginator, "max_count", 3)
    AssetEventFactory.create_batch(5)

    # when
    paginator = CappedCountPaginator(AssetEvent.objects.order_by("-id"), per_page=2)

    # then
    assert paginator.count == 3
    assert paginator.num_pages == 2


def test_asset_alias_mapping_changelist_lists_links(admin_client, world):
    content = admin_client.get(changelist("assetaliasasset")).content.decode()
    assert "example-alias" in content
    assert "s3://bucket/my-task" in content


def test_task_instance_changelist_links_runs(admin_client, world):
    content = admin_client.get(changelist("taskinstance")).content.decode()
    assert change("dagrun", world["taskinstance"].dag_run_id) in content
    assert TaskInstance.objects.count() == 2
    assert DagRun.objects.count() == 2
