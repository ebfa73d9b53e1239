"""Integrity rules the database itself enforces (docs/concepts.md, "The tables")."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from assets_app.models import (
    Asset,
    AssetActive,
    AssetAlias,
    AssetAliasAsset,
    AssetAliasAssetEvent,
    AssetEvent,
)
from tests.factories import AssetAliasFactory, AssetEventFactory, AssetFactory

pytestmark = pytest.mark.django_db


def test_duplicate_asset_name_and_uri_is_rejected():
    Asset.objects.create(name="a", uri="s3://a")
    with pytest.raises(IntegrityError), transaction.atomic():
        Asset.objects.create(name="a", uri="s3://a")


def test_same_name_with_another_uri_is_a_different_asset():
    Asset.objects.create(name="a", uri="s3://a")
    Asset.objects.create(name="a", uri="s3://b")
    assert Asset.objects.filter(name="a").count() == 2


def test_duplicate_alias_name_is_rejected():
    AssetAlias.objects.create(name="alias")
    with pytest.raises(IntegrityError), transaction.atomic():
        AssetAlias.objects.create(name="alias")


def test_duplicate_alias_asset_link_is_rejected():
    alias, asset = AssetAliasFactory(), AssetFactory()
    AssetAliasAsset.objects.create(alias=alias, asset=asset)
    with pytest.raises(IntegrityError), transaction.atomic():
        AssetAliasAsset.objects.create(alias=alias, asset=asset)


def test_duplicate_alias_event_link_is_rejected():
    alias, event = AssetAliasFactory(), AssetEventFactory()
    AssetAliasAssetEvent.objects.create(alias=alias, event=event)
    with pytest.raises(IntegrityError), transaction.atomic():
        AssetAliasAssetEvent.objects.create(alias=alias, event=event)


@pytest.mark.parametrize("field", ["name", "uri"])
def test_two_active_assets_cannot_share_a_name_or_uri(field):
    first = Asset.objects.create(name="n1", uri="u1")
    second = Asset.objects.create(
        name="n2" if field == "uri" else "n1", uri="u1" if field == "uri" else "u2"
    )
    AssetActive.objects.create(asset=first, name=first.name, uri=first.uri)
    with pytest.raises(IntegrityError), transaction.atomic():
        AssetActive.objects.create(asset=second, name=second.name, uri=second.uri)


def test_deleting_an_asset_keeps_its_events():
    # given
    event = AssetEventFactory(extra={"k": "v"})
    alias = AssetAliasFactory()
    AssetAliasAssetEvent.objects.create(alias=alias, event=event)
    asset_id = event.asset_id
    # when
    Asset.objects.filter(pk=asset_id).delete()
    # then
    kept = AssetEvent.objects.select_related("asset").get(pk=event.pk)
    assert kept.asset_id == asset_id
    assert kept.asset is None
    assert kept.extra == {"k": "v"}
    assert list(kept.source_aliases.all()) == [alias]


def test_deleting_an_alias_removes_only_its_links():
    alias, asset = AssetAliasFactory(), AssetFactory()
    AssetAliasAsset.objects.create(alias=alias, asset=asset)
    alias.delete()
    assert AssetAliasAsset.objects.count() == 0
    assert Asset.objects.filter(pk=asset.pk).exists()


#: the tables every success with outlets, and every run it makes, writes to
EVENT_PATH_TABLES = (
    "asset",
    "asset_alias",
    "asset_alias_asset",
    "asset_alias_asset_event",
    "asset_event",
    "asset_dag_run_queue",
    "dag_run",
    "dagrun_asset_event",
    "task_instance",
)


def test_no_index_is_the_prefix_of_another():
    """Every index costs a write per inserted row; one whose columns begin another index's
    (a foreign key's own index under a composite unique key, say) serves no lookup the other
    does not (migrations 0017, 0019 and 0021), on the event path and in every other table."""
    from django.apps import apps
    from django.db import connection

    tables = sorted({m._meta.db_table for m in apps.get_app_config("assets_app").get_models()})
    assert set(EVENT_PATH_TABLES) <= set(tables)
    redundant = []
    with connection.cursor() as cursor:
        for table in tables:
            constraints = connection.introspection.get_constraints(cursor, table)
            keys = [info["columns"] for info in constraints.values() if info["columns"]]
            for name, info in constraints.items():
                columns = info["columns"]
                if (
                    info["index"]
                    and not info["unique"]
                    and not info["primary_key"]
                    and columns
                    and all(columns)  # expression indexes (Upper(...)) name no column
                    and any(other != columns and other[: len(columns)] == columns for other in keys)
                ):
                    redundant.append((table, name, columns))
    assert redundant == []


#: the foreign keys the database enforces on the event path. Two are left to the ORM
#: (``db_constraint=False``, assets_app/models.py says why): ``asset_alias_asset_event.event_id``
#: (the link is inserted with its event; events are deleted only through the ORM) and
#: ``asset_dag_run_queue.target_dag_id`` (DAG rows are never deleted); each cost a check per
#: row at commit. ``asset_event.asset_id`` is not enforced either, as in Airflow.
ENFORCED_FOREIGN_KEYS = {
    ("asset_alias_asset", "alias_id", "asset_alias"),
    ("asset_alias_asset", "asset_id", "asset"),
    ("asset_alias_asset_event", "alias_id", "asset_alias"),
    ("asset_dag_run_queue", "asset_id", "asset"),
    ("dag_run", "dag_id", "dag"),
    ("dagrun_asset_event", "dag_run_id", "dag_run"),
    ("dagrun_asset_event", "event_id", "asset_event"),
    ("task_instance", "dag_run_id", "dag_run"),
    # a deferred task instance's trigger (Airflow's task_instance.trigger_id): set only while
    # it is deferred, so the check costs nothing on the event path's inserts
    ("task_instance", "trigger_id", "trigger"),
}


def test_foreign_keys_the_database_enforces_on_the_event_path():
    from django.db import connection

    enforced = set()
    with connection.cursor() as cursor:
        for table in EVENT_PATH_TABLES:
            for info in connection.introspection.get_constraints(cursor, table).values():
                if info["foreign_key"]:
                    (column,) = info["columns"]
                    enforced.add((table, column, info["foreign_key"][0]))
    assert enforced == ENFORCED_FOREIGN_KEYS


def test_no_face_deletes_a_dag(rf, admin_user):
    """What lets ``asset_dag_run_queue.target_dag_id`` go unenforced: a DAG that is no longer
    declared goes stale, and no face deletes its row (an ORM delete would still cascade)."""
    from django.contrib.admin.sites import site

    from assets_app.models import Dag
    from operatorapi.views import DagViewSet
    from publicapi.views import DagDetailView

    request = rf.get("/")
    request.user = admin_user
    assert site._registry[Dag].has_delete_permission(request) is False
    assert not hasattr(DagViewSet, "destroy")
    assert not hasattr(DagDetailView, "delete")


def test_deleting_an_event_through_the_orm_removes_its_alias_links():
    """``asset_alias_asset_event.event_id`` has no database constraint; the ORM's cascade is
    what removes the links (``prune_asset_events`` deletes this way)."""
    event, alias = AssetEventFactory(), AssetAliasFactory()
    AssetAliasAssetEvent.objects.create(alias=alias, event=event)
    AssetEvent.objects.filter(pk=event.pk).delete()
    assert not AssetAliasAssetEvent.objects.exists()


def test_deleting_a_dag_through_the_orm_removes_its_queue_rows():
    from assets_app.models import AssetDagRunQueue, Dag
    from tests.factories import DagFactory

    dag, asset = DagFactory(), AssetFactory()
    AssetDagRunQueue.objects.create(asset=asset, target_dag=dag)
    Dag.objects.filter(pk=dag.pk).delete()
    assert not AssetDagRunQueue.objects.exists()
