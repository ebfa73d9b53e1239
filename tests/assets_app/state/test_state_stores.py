"""The task and asset state stores' services (``assets_app.services.state.state_stores``), with
Airflow 3.3's semantics: a task's store is its run's, task's and map index's, shared by every
try and kept when the task instance is cleared, gone with the run; an asset's store is the
active asset's, gone with the asset or when it stops being active."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
import yaml
from django.core.management import call_command
from django.utils import timezone

from assets_app.exceptions import (
    AssetNotFoundError,
    StateStoreKeyNotFoundError,
    TaskInstanceNotFoundError,
)
from assets_app.models import AssetStateStore, TaskInstance, TaskStateStore
from assets_app.services.dags.declare import dags_declare
from assets_app.services.dags.manifest import manifest_parse
from assets_app.services.runs.clearing import task_instances_clear
from assets_app.services.state import state_stores as ss
from tests.factories import DagRunFactory, TaskInstanceFactory

pytestmark = pytest.mark.django_db

MANIFEST = """
dags:
  - dag_id: producer
    tasks:
      - task_id: produce
        outlets: [{asset: {name: orders, uri: "s3://warehouse/orders"}}]
"""


def declare(text: str) -> None:
    dags_declare(manifest=manifest_parse(yaml.safe_load(text)), fileloc="stores.yaml")


def test_a_task_store_is_shared_by_every_try_and_kept_when_cleared():
    # given a value its first try stored
    ti = TaskInstanceFactory(state="success", task_id="run_job")
    ss.task_state_set(task_instance_id=ti.pk, key="job_id", value="job-1")
    first_id = ti.pk

    # when the task instance is cleared (a new try, with a new id)
    task_instances_clear(task_instances=TaskInstance.objects.filter(pk=ti.pk))
    (again,) = TaskInstance.objects.filter(dag_run=ti.dag_run, task_id="run_job")

    # then the new try reads it; the old try's id names no store any more
    assert again.pk != first_id
    assert ss.task_state_get(task_instance_id=again.pk, key="job_id") == "job-1"
    with pytest.raises(TaskInstanceNotFoundError, match=f"Task instance {first_id} not found"):
        ss.task_state_get(task_instance_id=first_id, key="job_id")


def test_a_task_store_is_its_runs_tasks_and_map_indexs():
    ti = TaskInstanceFactory(task_id="t")
    same_task_other_run = TaskInstanceFactory(
        task_id="t", dag_run=DagRunFactory(dag=ti.dag_run.dag)
    )
    other_task = TaskInstanceFactory(task_id="u", dag_run=ti.dag_run)
    mapped = TaskInstanceFactory(task_id="t", dag_run=ti.dag_run, map_index=0)
    for n, each in enumerate((ti, same_task_other_run, other_task, mapped)):
        ss.task_state_set(task_instance_id=each.pk, key="k", value=n)

    assert [ss.task_state_get(task_instance_id=t.pk, key="k") for t in (ti, mapped)] == [0, 3]

    # clear removes this task instance's keys only
    assert ss.task_state_clear(task_instance_id=ti.pk) == 1
    with pytest.raises(StateStoreKeyNotFoundError, match="Task state store key 'k' not found"):
        ss.task_state_get(task_instance_id=ti.pk, key="k")
    assert sorted(TaskStateStore.objects.values_list("value", flat=True)) == ["1", "2", "3"]


def test_a_set_replaces_the_value_and_its_expiry_and_keeps_json_exactly():
    ti = TaskInstanceFactory()
    later = timezone.now() + timedelta(days=30)
    ss.task_state_set(task_instance_id=ti.pk, key="a/b", value=[1], expires_at=later)
    value = {"z": 1, "a": [True, None, 1.5, "é"], "m": {"y": {}, "b": []}}

    ss.task_state_set(task_instance_id=ti.pk, key="a/b", value=value)

    (row,) = TaskStateStore.objects.all()
    assert row.expires_at is None
    assert (row.dag_id, row.run_id, row.task_id, row.map_index) == (
        ti.dag_id,
        ti.run_id,
        ti.task_id,
        -1,
    )
    got = ss.task_state_get(task_instance_id=ti.pk, key="a/b")
    assert got == value
    assert list(got) == ["z", "a", "m"]  # an object's keys in the order they were sent


def test_delete_is_a_no_op_for_a_missing_key():
    ti = TaskInstanceFactory()
    ss.task_state_set(task_instance_id=ti.pk, key="k", value=1)

    assert ss.task_state_delete(task_instance_id=ti.pk, key="other") == 0
    assert ss.task_state_delete(task_instance_id=ti.pk, key="k") == 1
    assert not TaskStateStore.objects.exists()


def test_a_task_store_goes_with_its_run():
    ti = TaskInstanceFactory()
    ss.task_state_set(task_instance_id=ti.pk, key="k", value=1)

    ti.dag_run.delete()

    assert not TaskStateStore.objects.exists()


def test_expired_rows_are_deleted_and_the_others_kept():
    ti = TaskInstanceFactory()
    now = timezone.now()
    ss.task_state_set(task_instance_id=ti.pk, key="old", value=1, expires_at=now - timedelta(1))
    ss.task_state_set(task_instance_id=ti.pk, key="new", value=2, expires_at=now + timedelta(1))
    ss.task_state_set(task_instance_id=ti.pk, key="never", value=3)

    assert list(ss.task_states_expired(now=now).values_list("key", flat=True)) == ["old"]
    assert ss.task_states_expired_delete(now=now) == 1
    assert sorted(TaskStateStore.objects.values_list("key", flat=True)) == ["never", "new"]


def test_an_asset_store_is_the_active_assets_by_name_or_uri_and_names_its_writer():
    declare(MANIFEST)
    ti = TaskInstanceFactory(task_id="produce", map_index=2)

    ss.asset_state_set(key="watermark", value="t1", name="orders", writer_task_instance_id=ti.pk)
    ss.asset_state_set(
        key="watermark", value="t2", uri="s3://warehouse/orders", writer_task_instance_id=ti.pk
    )

    assert ss.asset_state_get(key="watermark", name="orders") == "t2"
    (row,) = AssetStateStore.objects.all()
    assert (
        row.last_updated_by_kind,
        row.last_updated_by_dag_id,
        row.last_updated_by_run_id,
        row.last_updated_by_task_id,
        row.last_updated_by_map_index,
    ) == ("task", ti.dag_id, ti.run_id, "produce", 2)
    assert ss.asset_state_delete(key="nope", uri="s3://warehouse/orders") == 0
    assert ss.asset_state_clear(name="orders") == 1
    with pytest.raises(StateStoreKeyNotFoundError, match="Asset state store key 'watermark'"):
        ss.asset_state_get(key="watermark", uri="s3://warehouse/orders")


@pytest.mark.parametrize(
    ("lookup", "message"),
    [
        pytest.param({"name": "nope"}, "Asset with name='nope' not found", id="name"),
        pytest.param({"uri": "s3://nope"}, "Asset with uri='s3://nope' not found", id="uri"),
    ],
)
def test_an_unknown_asset_has_no_store(lookup, message):
    declare(MANIFEST)
    ti = TaskInstanceFactory()

    with pytest.raises(AssetNotFoundError, match=message):
        ss.asset_state_set(key="k", value=1, writer_task_instance_id=ti.pk, **lookup)
    with pytest.raises(AssetNotFoundError, match=message):
        ss.asset_state_get(key="k", **lookup)


def test_an_asset_store_goes_when_no_dag_declares_the_asset_any_more():
    # given state on a declared asset
    declare(MANIFEST)
    ti = TaskInstanceFactory()
    ss.asset_state_set(key="watermark", value="t1", name="orders", writer_task_instance_id=ti.pk)

    # when its DAG no longer declares it
    declare(
        """
dags:
  - dag_id: producer
    tasks:
      - task_id: produce
"""
    )

    # then the asset is inactive, its store gone, and no task reaches it
    assert not AssetStateStore.objects.exists()
    with pytest.raises(AssetNotFoundError):
        ss.asset_state_get(key="watermark", name="orders")


def test_state_store_clean_lists_then_deletes_the_expired_keys():
    ti = TaskInstanceFactory(task_id="t")
    yesterday = timezone.now() - timedelta(days=1)
    ss.task_state_set(task_instance_id=ti.pk, key="old", value=1, expires_at=yesterday)
    ss.task_state_set(task_instance_id=ti.pk, key="kept", value=2)

    dry = StringIO()
    call_command("state_store_clean", "--dry-run", stdout=dry)
    assert TaskStateStore.objects.count() == 2
    real = StringIO()
    call_command("state_store_clean", stdout=real)

    assert dry.getvalue() == (
        f"{ti.dag_id} {ti.run_id} t map_index=-1 key='old'\n"
        "would delete 1 expired task state store key(s)\n"
    )
    assert real.getvalue() == "deleted 1 expired task state store key(s)\n"
    assert list(TaskStateStore.objects.values_list("key", flat=True)) == ["kept"]
