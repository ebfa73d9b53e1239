"""The DAG page's grid (issue 40): the last 25 runs (oldest on the left) by tasks in graph
order, each cell a task instance in its state's colour linking to its page and log; a fixed
number of queries whatever the number of runs and tasks."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from assets_app.admin.panels import GRID_RUNS, dag_grid, task_ids_in_graph_order
from assets_app.models import DagRun, DagTask
from tests.assets_app.admin import change, page_text, query_count
from tests.factories import DagFactory, DagRunFactory, TaskInstanceFactory

pytestmark = pytest.mark.django_db

DAG_ID = "warehouse_orders_daily_rollup_v2"
START = datetime(2026, 11, 1, tzinfo=UTC)


def _dag(tasks: dict[str, list[str]]):
    # declared out of graph order: the grid sorts them
    dag = DagFactory(dag_id=DAG_ID, tags=["orders"], task_ids=list(tasks))
    for task_id, upstream in tasks.items():
        DagTask.objects.create(dag=dag, task_id=task_id, upstream=upstream)
    return dag


def _runs(dag, states_by_run: list[dict[str, str]], *, first_day: int = 0) -> list[DagRun]:
    runs = []
    for n, states in enumerate(states_by_run, start=first_day):
        at = START + timedelta(days=n)
        run = DagRunFactory(
            dag=dag,
            run_id=f"scheduled__{at.isoformat()}",
            run_after=at,
            logical_date=at,
            state="success" if set(states.values()) == {"success"} else "failed",
        )
        for task_id, state in states.items():
            TaskInstanceFactory(dag_run=run, task_id=task_id, state=state, try_number=1)
        runs.append(run)
    return runs


TASKS = {
    "publish_to_finance_mart": ["load_orders_fact"],
    "load_orders_fact": ["transform_orders", "extract_currency_rates"],
    "transform_orders": ["extract_orders"],
    "extract_orders": [],
    "extract_currency_rates": [],
}


def test_tasks_come_in_graph_order_keeping_the_declared_order_among_equals():
    dag = _dag(TASKS)

    assert task_ids_in_graph_order(dag) == [
        "extract_orders",
        "transform_orders",
        "extract_currency_rates",
        "load_orders_fact",
        "publish_to_finance_mart",
    ]


def test_the_grid_has_a_cell_per_run_and_task_with_its_state_and_link():
    dag = _dag(TASKS)
    all_ok = dict.fromkeys(TASKS, "success")
    failed = all_ok | {"load_orders_fact": "failed", "publish_to_finance_mart": "upstream_failed"}
    runs = _runs(dag, [all_ok, failed])
    late_task = DagTask.objects.create(dag=dag, task_id="notify_slack", upstream=[])

    grid = dag_grid(dag, runs)

    assert [row.run for row in grid.runs] == runs
    by_task = {row.task_id: row.cells for row in grid.rows}
    assert [c.state for c in by_task["load_orders_fact"]] == ["success", "failed"]
    assert [c.state for c in by_task["publish_to_finance_mart"]] == ["success", "upstream_failed"]
    # a task declared after the runs: empty cells, no link
    assert [(c.state, c.url) for c in by_task[late_task.task_id]] == [(None, None)] * 2
    cell = by_task["load_orders_fact"][1]
    assert cell.title == f"load_orders_fact @ {runs[1].run_id}: failed, try 1"
    assert cell.url.startswith("/admin/assets_app/taskinstance/")


def test_the_dag_page_shows_the_grid_oldest_run_first_in_a_fixed_number_of_queries(
    admin_client,
):
    dag = _dag(TASKS)
    ok = dict.fromkeys(TASKS, "success")
    _runs(dag, [ok] * 3)
    url = change("dag", DAG_ID)
    admin_client.get(url)  # warm caches (content types, session)
    few = query_count(admin_client, url)

    # 30 newer runs: the 25 newest are shown
    more = _runs(dag, [ok | {"extract_orders": "running"}] * 30, first_day=3)
    many = query_count(admin_client, url)
    html = admin_client.get(url).content.decode()

    assert many == few
    grid = html[html.index('id="ar-dag-grid"') :]
    grid = grid[: grid.index("</table>")]
    assert f"the last {GRID_RUNS} runs" in html
    assert grid.count("ar-grid-run ") == GRID_RUNS
    # the newest run is the last column, its extract_orders cell running
    newest = more[-1]
    assert grid.rindex(newest.run_id) > grid.index(more[-GRID_RUNS].run_id)
    body = grid[grid.index("<tbody>") :]
    rows = re.findall(r"<tr><th class=\"ar-grid-task\">(.*?)</tr>", body, flags=re.S)
    assert "extract_orders" in rows[0]
    assert "publish_to_finance_mart" in rows[-1]
    assert rows[0].count("ar-grid-running") == GRID_RUNS


def test_the_run_page_lists_its_task_instances_in_graph_order(admin_client):
    dag = _dag(TASKS)
    (run,) = _runs(dag, [dict.fromkeys(TASKS, "success")])

    text = page_text(admin_client, change("dagrun", run.pk))  # ids read whole

    inline = text[text.index('id="task_instances-group"') :]  # after the graph and the Gantt
    positions = [inline.index(f">{task_id}<") for task_id in task_ids_in_graph_order(dag)]
    assert positions == sorted(positions)
    assert inline.index(">extract_orders<") < inline.index(">publish_to_finance_mart<")
