"""assets_app.admin.runs: DAG runs and task instances."""

from __future__ import annotations

import pytest

from assets_app.models import DagRun, TaskInstance
from tests.assets_app.admin import (
    assert_query_count_does_not_grow,
    change,
    changelist,
    listed,
)
from tests.factories import DagRunFactory, TaskInstanceFactory

pytestmark = pytest.mark.django_db


def test_dag_run_page_shows_consumed_events(admin_client, world):
    content = admin_client.get(change("dagrun", world["dagrun"].pk)).content.decode()
    assert "consumed asset events" in content.lower()
    assert f"event {world['assetevent'].pk}" in content
    assert "consume_asset_alias_events" in content


@pytest.mark.parametrize(
    ("model", "params", "expected"),
    [
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
    ],
)
def test_search_and_filters(admin_client, world, model, params, expected):
    assert listed(admin_client, model, params) == {world[name].pk for name in expected}


def test_task_instance_search_by_id(admin_client, world):
    ti = world["taskinstance"]
    response = admin_client.get(changelist("taskinstance"), {"q": str(ti.pk)})
    assert list(response.context["cl"].result_list) == [ti]


def test_task_instance_changelist_links_runs(admin_client, world):
    content = admin_client.get(changelist("taskinstance")).content.decode()
    assert change("dagrun", world["taskinstance"].dag_run_id) in content
    assert TaskInstance.objects.count() == 2
    assert DagRun.objects.count() == 2


def test_task_instance_changelist_query_count_does_not_grow_with_rows(admin_client):
    assert_query_count_does_not_grow(
        admin_client, "taskinstance", lambda n: TaskInstanceFactory.create_batch(n)
    )


def test_dag_run_changelist_query_count_does_not_grow_with_rows(admin_client):
    assert_query_count_does_not_grow(
        admin_client, "dagrun", lambda n: DagRunFactory.create_batch(n)
    )


def test_dag_run_page_shows_the_runs_conf(admin_client):
    # given a run triggered with a conf
    run = DagRunFactory(conf={"region": "eu-west", "limit": 42})

    # when its page is shown
    content = admin_client.get(change("dagrun", run.pk)).content.decode()

    # then the conf's keys and values are on it
    assert "conf" in content
    assert "region" in content
    assert "eu-west" in content
    assert "42" in content
