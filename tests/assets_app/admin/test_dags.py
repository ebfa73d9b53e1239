"""assets_app.admin.dags: DAGs (only the pause flag changes) and the asset DAG-run queue."""

from __future__ import annotations

import re

import pytest

from assets_app.models import Dag
from tests.assets_app.admin import EXAMPLE, change, changelist, listed

pytestmark = pytest.mark.django_db


def test_dag_page_shows_expression_and_references(admin_client, world):
    content = admin_client.get(change("dag", world["scheduled_dag"].pk)).content.decode()
    assert "&quot;alias&quot;: {" in content
    assert "schedule: aliases" in content.lower()
    listing = admin_client.get(changelist("dag")).content.decode()
    assert "alias:example-alias" in listing


def test_dag_page_shows_only_the_reference_tables_it_has_rows_in(admin_client, world):
    # when
    response = admin_client.get(change("dag", "asset_s3_bucket_consumer"))

    # then: no empty inline table
    formsets = response.context["inline_admin_formsets"]
    assert [formset.opts.verbose_name_plural for formset in formsets] == [
        "schedule: assets",
        "task inlets (assets)",
    ]
    assert not any(formset.has_add_permission for formset in formsets)
    schedule, inlets = formsets
    assert [form.instance.asset.uri for form in schedule.formset.forms] == ["s3://bucket/my-task"]
    assert [form.instance.task_id for form in inlets.formset.forms] == ["consume_asset_events"]


def test_a_stored_expression_that_does_not_parse_is_named_in_the_list(admin_client, world):
    # given
    Dag.objects.filter(pk="asset_s3_bucket_consumer").update(asset_expression={"bogus": 1})

    # when
    content = admin_client.get(changelist("dag")).content.decode()

    # then
    assert "invalid asset expression" in content


def test_queue_shows_how_long_rows_waited(admin_client, world):
    content = admin_client.get(changelist("assetdagrunqueue")).content.decode()
    assert re.search(r'<span class="ar-duration">[45] m \d\d? s</span>', content), content


@pytest.mark.parametrize(
    ("model", "params", "expected"),
    [
        pytest.param("dag", {"scheduled": "yes", "q": "s3"}, ["dag"], id="dag-scheduled"),
        pytest.param("assetdagrunqueue", {"q": "my-task"}, ["assetdagrunqueue"], id="queue-search"),
        pytest.param(
            "assetdagrunqueue",
            {"target_dag": "asset_s3_bucket_consumer"},
            ["assetdagrunqueue"],
            id="queue-dag",
        ),
    ],
)
def test_search_and_filters(admin_client, world, model, params, expected):
    assert listed(admin_client, model, params) == {world[name].pk for name in expected}


def test_unscheduled_dags_filter(admin_client, world):
    # when
    unscheduled = listed(admin_client, "dag", {"scheduled": "no"})

    # then the producers are listed, the consumers are not
    assert {"asset_s3_bucket_producer", "asset_alias_example_alias_producer"} <= unscheduled
    assert not {"asset_s3_bucket_consumer", "asset_alias_example_alias_consumer"} & unscheduled


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


def test_unpause_action_counts_only_the_dags_it_changed(admin_client, world):
    # given
    Dag.objects.filter(pk="asset_s3_bucket_consumer").update(is_paused=True)

    # when
    response = admin_client.post(
        changelist("dag"),
        {
            "action": "unpause",
            "_selected_action": ["asset_s3_bucket_consumer", "asset_s3_bucket_producer"],
        },
        follow=True,
    )

    # then
    assert "Unpaused 1 DAG(s)." in response.content.decode()
    assert not Dag.objects.filter(is_paused=True).exists()


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
