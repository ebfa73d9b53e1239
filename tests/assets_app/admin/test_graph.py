"""A run's picture: the DAG page's task graph (tasks along their edges, inlets and outlets of
every kind, the assets the recent runs produced), a run's page (the graph in the run's states,
the Gantt strip) and the buttons that act on a DAG, a run or a task instance (through the
services, each recorded in the History with the user)."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from assets_app.admin.panels import dag_lineage, run_panel
from assets_app.models import (
    Asset,
    AssetAlias,
    AssetAliasAssetEvent,
    AssetEvent,
    Dag,
    DagRun,
    TaskInstance,
    TaskLeafReference,
)
from tests.assets_app.admin import change, page_text
from tests.factories import DagRunFactory, TaskInstanceFactory

pytestmark = pytest.mark.django_db

GRAPH = Path(__file__).resolve().parents[3] / "devtools" / "showcase_dags.yaml"
DAG_ID = "warehouse_orders_daily_export_and_customer_dimension_refresh"
TASKS = ("extract_orders", "transform_orders", "export_orders", "refresh_customers")
LAST = "publish_report"


@pytest.fixture
def graph_dag() -> Dag:
    call_command("declare_dags", str(GRAPH), stdout=None)
    return Dag.objects.get(pk=DAG_ID)


def _do(dag_or_obj_model: str, pk: object, name: str) -> str:
    return reverse(f"admin:assets_app_{dag_or_obj_model}_do", args=[pk, name])


def _run_with_states(dag: Dag, states: dict[str, str]) -> DagRun:
    start = timezone.now() - timedelta(minutes=10)
    run = DagRunFactory(dag=dag, run_id="scheduled__graph", state="running", start_date=start)
    for i, (task_id, state) in enumerate(states.items()):
        began = start + timedelta(seconds=30 * i) if state != "scheduled" else None
        finished = state in ("success", "failed")
        TaskInstanceFactory(
            dag_run=run,
            task_id=task_id,
            state=state,
            start_date=began,
            end_date=began + timedelta(seconds=20) if finished and began else None,
            duration=20.0 if finished else None,
        )
    return run


# --- what the manifest's alias and Asset.ref leaves store -----------------------------------


def test_alias_and_ref_leaves_are_stored_and_follow_the_manifest(graph_dag, tmp_path):
    # then: the alias and Asset.ref outlets have rows (the assets have their own tables)
    rows = set(
        TaskLeafReference.objects.filter(dag=graph_dag).values_list(
            "task_id", "direction", "kind", "value"
        )
    )
    assert rows == {
        ("export_orders", "outlet", "alias", "daily-exports"),
        ("refresh_customers", "outlet", "name_ref", "customers"),
    }

    # when the manifest drops the alias and reads a uri reference instead
    text = GRAPH.read_text().replace("          - alias: daily-exports\n", "")
    text = text.replace(
        "      - task_id: transform_orders\n",
        "      - task_id: transform_orders\n        inlets:\n"
        '          - asset_ref: {uri: "s3://raw/orders"}\n',
    )
    manifest = tmp_path / "dags.yaml"
    manifest.write_text(text)
    Dag.objects.filter(pk=DAG_ID).update(fileloc=str(manifest))
    call_command("declare_dags", str(manifest), stdout=None)

    # then
    rows = set(
        TaskLeafReference.objects.filter(dag=graph_dag).values_list(
            "task_id", "direction", "kind", "value"
        )
    )
    assert rows == {
        ("refresh_customers", "outlet", "name_ref", "customers"),
        ("transform_orders", "inlet", "uri_ref", "s3://raw/orders"),
    }


# --- the DAG page's task graph ----------------------------------------------------------------


def test_dag_graph_draws_tasks_edges_inlets_outlets_and_what_was_produced(graph_dag):
    # given a finished run whose tasks produced the declared asset, an asset through the
    # alias and the asset the Asset.ref names
    run = DagRunFactory(dag=graph_dag, run_id="scheduled__1", state="success")
    orders = Asset.objects.get(name="orders")
    customers = Asset.objects.get(name="customers")
    export = Asset.objects.create(name="s3://warehouse/exports/d1.csv", uri="s3://w/e/d1.csv")
    source = {"source_dag_id": DAG_ID, "source_run_id": run.run_id}
    for _ in range(2):
        AssetEvent.objects.create(asset=orders, source_task_id="export_orders", **source)
    through = AssetEvent.objects.create(asset=export, source_task_id="export_orders", **source)
    AssetAliasAssetEvent.objects.create(
        alias=AssetAlias.objects.get(name="daily-exports"), event=through
    )
    AssetEvent.objects.create(asset=customers, source_task_id="refresh_customers", **source)

    # when
    graph = dag_lineage(graph_dag, recent_run_ids=[run.run_id])

    # then: the tasks along their edges, the DAG above its root task
    edges = set(graph.edges)
    task = {t: f"task:{t}" for t in (*TASKS, LAST)}
    assert {
        ("dag", task["extract_orders"]),
        (task["extract_orders"], task["transform_orders"]),
        (task["transform_orders"], task["export_orders"]),
        (task["transform_orders"], task["refresh_customers"]),
        (task["export_orders"], task[LAST]),
        (task["refresh_customers"], task[LAST]),
    } <= edges
    assert ("dag", task["transform_orders"]) not in edges
    assert graph.nodes[task[LAST]].note == "trigger rule all_done"
    # inlets above their task, outlets below it
    my_task = Asset.objects.get(uri="s3://bucket/my-task")
    assert (f"in:{my_task.pk}", task["extract_orders"]) in edges
    assert (f"in:{customers.pk}", task[LAST]) in edges
    assert (task["export_orders"], f"out:{orders.pk}") in edges
    alias = "outlet:export_orders:alias:daily-exports"
    ref = "outlet:refresh_customers:name_ref:customers"
    assert (task["export_orders"], alias) in edges
    assert (task["refresh_customers"], ref) in edges
    assert graph.nodes[ref].kind == "reference"
    assert graph.nodes[ref].note == "outlet: Asset.ref(name)"
    # what the run produced: counted on the declared outlet, under the alias and the ref
    assert graph.nodes[f"out:{orders.pk}"].note == "outlet · produced · 2 event(s)"
    assert (alias, f"produced:{export.pk}") in edges
    assert (ref, f"produced:{customers.pk}") in edges
    assert graph.nodes[f"produced:{export.pk}"].url == change("asset", export.pk)


def test_dag_graph_reads_a_fixed_number_of_queries(graph_dag, django_assert_num_queries):
    # the queue, 4 schedule reference tables, the tasks twice, inlets, outlets, leaves,
    # the produced assets and their aliases
    with django_assert_num_queries(12):
        dag_lineage(graph_dag, recent_run_ids=["scheduled__1"])


def test_run_panel_reads_a_fixed_number_of_queries(graph_dag, django_assert_num_queries):
    # given a run of its five tasks, and one reread (run.dag is then a fetch of its own)
    run = DagRun.objects.get(pk=_run_with_states(graph_dag, dict.fromkeys(TASKS, "success")).pk)

    # then: the task instances, the DAG, the graph's 12
    with django_assert_num_queries(14):
        run_panel(run)


def test_dag_page_draws_the_graph_top_to_bottom_with_every_box_a_link(admin_client, graph_dag):
    html = page_text(admin_client, change("dag", DAG_ID))
    svg = html[html.index('<svg class="ar-lineage ar-flow-down"') :]
    svg = svg[: svg.index("</svg>")]
    for task_id in (*TASKS, LAST):
        assert f">{task_id}</text>" in svg, task_id
    assert "daily-exports" in svg
    assert "customers" in svg
    assert svg.count("<a href=") == svg.count("<rect ")


# --- a run's page -----------------------------------------------------------------------------


def test_run_graph_colours_each_task_by_state_with_its_duration(graph_dag):
    # given
    states = dict.fromkeys(TASKS[:2], "success") | {
        "export_orders": "running",
        "refresh_customers": "failed",
        LAST: "scheduled",
    }
    run = _run_with_states(graph_dag, states)
    tis = {ti.task_id: ti for ti in TaskInstance.objects.filter(dag_run=run)}

    # when
    graph = dag_lineage(graph_dag, recent_run_ids=[run.run_id], task_instances=tis.values())
    panel = run_panel(run)

    # then
    for task_id, state in states.items():
        node = graph.nodes[f"task:{task_id}"]
        assert node.state == state
        assert node.url == change("taskinstance", tis[task_id].pk)
    assert graph.nodes["task:extract_orders"].note == "success · 20 s"
    assert graph.nodes[f"task:{LAST}"].note == "scheduled"
    assert 'class="ar-node ar-task ar-ti ar-ti-failed"' in panel.graph
    # the Gantt strip: one row per task instance, a bar for each started one, in start order
    gantt = str(panel.gantt)
    rows = re.findall(r'class="ar-gantt-label"[^>]*>([^<]+)<', gantt)
    assert rows == [*TASKS, LAST]
    assert gantt.count("<rect ") == 4
    assert "scheduled, not started" in gantt
    assert "20 s" in gantt


def test_run_page_shows_graph_gantt_and_clear_buttons(admin_client, graph_dag):
    run = _run_with_states(graph_dag, dict.fromkeys((*TASKS, LAST), "success"))
    html = page_text(admin_client, change("dagrun", run.pk))
    assert 'id="ar-run-graph"' in html
    assert '<svg class="ar-gantt"' in html
    assert f'action="{_do("dagrun", run.pk, "clear")}"' in html
    assert f'action="{_do("dagrun", run.pk, "clear_failed")}"' in html


# --- the buttons ------------------------------------------------------------------------------


def test_trigger_button_creates_a_run_and_records_it_with_the_user(admin_client, admin_user):
    # given
    call_command("declare_dags", str(GRAPH), stdout=None)
    page = page_text(admin_client, change("dag", DAG_ID))
    assert f'action="{_do("dag", DAG_ID, "trigger")}"' in page

    # when
    response = admin_client.post(_do("dag", DAG_ID, "trigger"), follow=True)

    # then
    assert response.redirect_chain[-1][0] == change("dag", DAG_ID)
    run = DagRun.objects.get(dag_id=DAG_ID)
    assert run.run_type == "manual"
    assert run.state == "running"  # the DAG has room: it starts at once
    assert TaskInstance.objects.filter(dag_run=run).count() == 5
    message = page_text(admin_client, change("dag", DAG_ID))
    assert "Triggered" not in message  # the message was shown once, on the redirect
    shown = [str(m) for m in response.context["messages"]]
    assert any(run.run_id in m and change("dagrun", run.pk) in m for m in shown), shown
    entry = LogEntry.objects.get(object_id=DAG_ID)
    assert entry.user == admin_user
    assert entry.get_change_message() == f"Triggered run {run.run_id}"


def test_pause_and_unpause_buttons_go_through_the_service_and_the_history(
    admin_client, admin_user, graph_dag
):
    page = page_text(admin_client, change("dag", DAG_ID))
    assert _do("dag", DAG_ID, "pause") in page
    assert _do("dag", DAG_ID, "unpause") not in page

    admin_client.post(_do("dag", DAG_ID, "pause"))
    assert Dag.objects.get(pk=DAG_ID).is_paused
    page = page_text(admin_client, change("dag", DAG_ID))
    assert _do("dag", DAG_ID, "unpause") in page
    assert _do("dag", DAG_ID, "pause") not in page

    admin_client.post(_do("dag", DAG_ID, "unpause"))
    assert not Dag.objects.get(pk=DAG_ID).is_paused
    history = LogEntry.objects.filter(object_id=DAG_ID).order_by("action_time")
    assert [(e.get_change_message(), e.user) for e in history] == [
        ("Paused", admin_user),
        ("Unpaused", admin_user),
    ]


def test_clear_buttons_clear_a_run_or_one_task_instance(admin_client, admin_user, graph_dag):
    # given a finished run
    run = _run_with_states(graph_dag, dict.fromkeys((*TASKS, LAST), "success"))
    DagRun.objects.filter(pk=run.pk).update(state="success", end_date=timezone.now())
    one = TaskInstance.objects.get(dag_run=run, task_id="extract_orders")

    # when one task instance is cleared from its page
    response = admin_client.post(_do("taskinstance", one.pk, "clear"))

    # then it is a new try (a new row), the rest unchanged; its page is next, its History
    # says how it came to be
    new = TaskInstance.objects.get(dag_run=run, task_id="extract_orders")
    assert (new.state, new.try_number) == ("scheduled", 2)
    assert new.pk != one.pk
    assert response.url == change("taskinstance", new.pk)
    assert TaskInstance.objects.filter(dag_run=run, state="success").count() == 4
    entry = LogEntry.objects.get(object_id=str(new.pk))
    assert entry.user == admin_user
    assert entry.get_change_message() == "Cleared: try 2 scheduled"

    # when the whole run is cleared from its page
    admin_client.post(_do("dagrun", run.pk, "clear"))

    # then
    assert not TaskInstance.objects.filter(dag_run=run, state="success").exists()
    cleared = DagRun.objects.get(pk=run.pk)
    assert cleared.state in ("queued", "running")  # requeued (and started again if it may)
    assert cleared.end_date is None
    assert LogEntry.objects.filter(object_id=str(run.pk), user=admin_user).exists()


@pytest.mark.parametrize(
    ("name", "state"), [("mark_success", "success"), ("mark_failed", "failed")]
)
def test_mark_buttons_end_a_running_run_through_the_service_and_the_history(
    admin_client, admin_user, graph_dag, name, state
):
    # given a running run: one task done, one running, the rest waiting
    states = dict.fromkeys((*TASKS, LAST), "scheduled")
    states[TASKS[0]], states[TASKS[1]] = "success", "running"
    run = _run_with_states(graph_dag, states)
    assert f"/do/{name}/" in page_text(admin_client, change("dagrun", run.pk))

    # when it is marked from its page
    response = admin_client.post(_do("dagrun", run.pk, name))

    # then the run has the state, nothing is left unfinished, the History says who did it
    assert response.url == change("dagrun", run.pk)
    marked = DagRun.objects.get(pk=run.pk)
    assert (marked.state, marked.end_date is not None) == (state, True)
    by_task = dict(TaskInstance.objects.filter(dag_run=run).values_list("task_id", "state"))
    assert by_task[TASKS[0]] == "success"  # finished ones are left as they were
    assert by_task[TASKS[1]] == state  # the running one takes the run's state (Airflow)
    assert {by_task[t] for t in (*TASKS[2:], LAST)} == {"skipped"}
    entry = LogEntry.objects.get(object_id=str(run.pk))
    assert entry.user == admin_user
    assert entry.get_change_message().startswith(f"Marked {state}")


@pytest.mark.parametrize(
    ("method", "name", "status"),
    [
        pytest.param("get", "trigger", 405, id="GET does nothing"),
        pytest.param("post", "delete", 404, id="no such action"),
    ],
)
def test_buttons_refuse_what_they_are_not(admin_client, graph_dag, method, name, status):
    response = getattr(admin_client, method)(_do("dag", DAG_ID, name))
    assert response.status_code == status
    assert not DagRun.objects.exists()


def test_buttons_need_the_permission(client, graph_dag):
    # given a staff user who may only view DAGs
    user = get_user_model().objects.create_user("viewer", password="pw", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_dag"))
    client.force_login(user)

    # then: no button, and a POST is refused
    page = page_text(client, change("dag", DAG_ID))
    assert "/do/trigger/" not in page
    assert client.post(_do("dag", DAG_ID, "trigger")).status_code == 403
    assert not DagRun.objects.exists()


# --- docs/operator-pages.md ------------------------------------------------------------------


def test_the_docs_manifest_declares_and_draws_what_the_page_says(tmp_path):
    # given the YAML block of docs/operator-pages.md (its one block)
    doc = (Path(__file__).resolve().parents[3] / "docs" / "operator-pages.md").read_text()
    assert len(re.findall(r"^```", doc, re.M)) == 2  # one block: this test runs it
    (block,) = re.findall(r"```yaml\n(.*?)```", doc, re.S)
    manifest = tmp_path / "dags.yaml"
    manifest.write_text(block)

    # when
    call_command("declare_dags", str(manifest), stdout=None)

    # then: five tasks, an alias and a reference drawn, the trigger rule said
    graph = dag_lineage(Dag.objects.get(pk=DAG_ID))
    tasks = [n for n in graph.nodes.values() if n.kind == "task"]
    assert len(tasks) == 5
    assert [n.label for n in graph.nodes.values() if n.kind == "alias"] == ["daily-exports"]
    assert [n.label for n in graph.nodes.values() if n.kind == "reference"] == ["customers"]
    assert graph.nodes[f"task:{LAST}"].note == "trigger rule all_done"
    # and it is the showcase's DAG, as the screenshot shows
    assert block == "dags:\n" + GRAPH.read_text().split("dags:\n", 1)[1]


MAPPED = """
dags:
  - dag_id: nightly_tables_copy_with_one_task_per_table
    tags: [mapping, nightly]
    tasks:
      - {task_id: list_tables}
      - {task_id: copy_table, upstream: [list_tables], mapped: {length: {xcom: list_tables}}}
      - {task_id: report, upstream: [copy_table], trigger_rule: all_done}
"""


def test_a_mapped_task_is_one_box_with_its_counts_opening_its_map_indexes(admin_client, tmp_path):
    """Issue 38: the run's graph draws a mapped task once, ``task [n]``, with how many of its
    map indexes are in each state and the summary state's colour; the box opens the list of
    its map indexes in that run, each labelled ``task [i]`` and its rendered label."""
    import yaml

    from assets_app.services.dags.declare import dags_declare
    from assets_app.services.dags.manifest import manifest_parse
    from assets_app.services.runs.advance import task_instances_advance
    from assets_app.services.runs.dag_runs import dag_run_trigger
    from assets_app.services.state.xcoms import task_map_record

    dag_id = "nightly_tables_copy_with_one_task_per_table"
    dags_declare(manifest=manifest_parse(yaml.safe_load(MAPPED)), fileloc="tables.yaml")
    run = dag_run_trigger(dag_id=dag_id, run_id="scheduled__2026-12-05T00:00:00+00:00")
    TaskInstance.objects.filter(task_id="list_tables").update(state="success")
    task_map_record(dag_run=run, task_id="list_tables", map_index=-1, length=4)
    task_instances_advance(dag_run_ids=[run.pk])
    copies = TaskInstance.objects.filter(dag_run=run, task_id="copy_table")
    copies.filter(map_index__in=[0, 1]).update(state="success")
    copies.filter(map_index=2).update(state="failed", rendered_map_index="table=customers")

    panel = run_panel(run)

    assert "copy_table [4]" in panel.graph
    assert "2 success · 1 failed · 1 scheduled" in panel.graph
    assert "copy_table [2]" in panel.gantt  # each map index on its own Gantt row
    listing = reverse("admin:assets_app_taskinstance_changelist")
    link = re.search(rf'href="({re.escape(listing)}\?[^"]*task_id=copy_table[^"]*)"', panel.graph)
    assert link is not None, panel.graph
    html = page_text(admin_client, link.group(1).replace("&amp;", "&"))
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html))
    assert "4 task instances" in text
    assert "copy_table [2] table=customers" in text
    for index in (0, 1, 3):
        assert f"copy_table [{index}]" in text


def test_mark_buttons_mark_one_task_instance_and_the_list_action_several(
    admin_client, admin_user, graph_dag
):
    # given a running run with a failed task and what its failure held back
    states = dict.fromkeys(TASKS, "success") | {"export_orders": "failed", LAST: "upstream_failed"}
    run = _run_with_states(graph_dag, states)
    failed = TaskInstance.objects.get(dag_run=run, task_id="export_orders")

    # when the failed one is marked success from its page
    admin_client.post(_do("taskinstance", failed.pk, "mark_success"))

    # then it succeeded (the same row: no new try), what it held back runs again, the
    # History and the event log say who
    failed.refresh_from_db()
    assert (failed.state, failed.try_number) == ("success", 1)
    assert TaskInstance.objects.get(dag_run=run, task_id=LAST).state == "scheduled"
    assert LogEntry.objects.get(object_id=str(failed.pk)).get_change_message() == ("Marked success")
    from assets_app.models import EventLog

    logged = EventLog.objects.get(event="patch_task_instance")
    assert (logged.owner, logged.task_id) == (admin_user.username, "export_orders")

    # and two are marked failed at once from the list
    pks = list(
        TaskInstance.objects.filter(
            dag_run=run, task_id__in=["extract_orders", "transform_orders"]
        ).values_list("pk", flat=True)
    )
    listing = reverse("admin:assets_app_taskinstance_changelist")
    admin_client.post(
        listing, {"action": "mark_task_instances_failed", "_selected_action": [str(p) for p in pks]}
    )
    assert set(TaskInstance.objects.filter(pk__in=pks).values_list("state", flat=True)) == {
        "failed"
    }
