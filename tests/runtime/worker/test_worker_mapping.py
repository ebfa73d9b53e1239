"""Issue 38: dynamic task mapping in real Airflow DAG files, run by a real ``manage.py worker``
(Airflow's task SDK resolves each map index's arguments) against a real server, on both
databases: an expansion over an upstream's XCom of 5 with one element failing (an
``all_done`` join runs, an ``all_success`` one is ``upstream_failed``, as Airflow), a mapped
task group per map index, ``expand_kwargs``, a cross product of ``.partial(...).expand``, a
reduce summing every map index's result, a zero-length expansion (skipped), a push beyond
``max_map_length`` (Airflow's 400 fails the pusher, its mapped task ``upstream_failed``), a
``map_index_template`` label, a clear of one map index that re-runs only it, and
docs/mapping.md's example as written. The test plays the scheduler
(``task_instances_advance``, as each pass does)."""

from __future__ import annotations

import importlib.util
import re
import textwrap
import time

import pytest

from assets_app.models import Dag, DagRun, TaskInstance, XCom
from assets_app.services.dags.declare import dags_set_paused
from assets_app.services.runs.advance import task_instances_advance
from assets_app.services.runs.clearing import task_instances_clear, task_instances_select
from assets_app.services.runs.dag_runs import dag_run_trigger
from tests.executionapi.conftest import airflow_sdk  # noqa: F401 (a fixture)
from tests.live_server import REPO
from tests.runtime.worker.conftest import dags_folder_load, wait_until

pytestmark = pytest.mark.slow

if importlib.util.find_spec("airflow.dag_processing") is None:  # pragma: no cover
    pytest.skip("apache-airflow-core is not installed", allow_module_level=True)

DAGS = """
from datetime import datetime

from airflow.sdk import DAG, task, task_group
from airflow.providers.standard.operators.python import PythonOperator

ARGS = dict(start_date=datetime(2026, 1, 1), schedule=None, catchup=False)

with DAG("partitions_mapped", tags=["mapping", "etl"], **ARGS):
    @task
    def list_partitions():
        return ["2026-12-01", "2026-12-02", "2026-12-03", "2026-12-04", "2026-12-05"]

    @task(map_index_template="{{ task.op_kwargs['day'] }}")
    def load(day):
        if day.endswith("04"):
            raise ValueError(f"partition {day} is corrupt")
        return int(day[-2:])

    @task(trigger_rule="all_done")
    def report(counts):
        return sorted(c for c in counts if c is not None)

    @task
    def publish(counts):
        return sum(counts)

    loaded = load.expand(day=list_partitions())
    report(loaded)
    publish(loaded)

with DAG("group_mapped", tags=["mapping"], **ARGS):
    @task_group
    def per_table(table):
        @task
        def extract(table):
            return f"{table}:rows"

        @task
        def check(rows):
            if rows.startswith("bad"):
                raise ValueError(rows)
            return rows.upper()

        return check(extract(table))

    @task(trigger_rule="all_done")
    def summary(values):
        return sorted(v for v in values if v)

    summary(per_table.expand(table=["orders", "bad_customers", "items"]))

with DAG("kwargs_and_cross_product", tags=["mapping"], **ARGS):
    @task
    def pairs():
        return [{"a": 1, "b": 2}, {"a": 10, "b": 20}]

    def add(a, b):
        return a + b

    added = PythonOperator.partial(task_id="add", python_callable=add).expand_kwargs(
        pairs().map(lambda p: {"op_kwargs": p})
    )

    @task
    def times(x, y):
        return x * y

    crossed = times.expand(x=[1, 2, 3], y=[10, 100])

    @task
    def total(values):
        return sum(values)

    total.override(task_id="sum_added")(added.output)
    total.override(task_id="sum_crossed")(crossed)

with DAG("empty_and_too_wide", tags=["mapping"], **ARGS):
    @task
    def nothing():
        return []

    @task
    def too_many():
        return list(range(1025))

    @task
    def each(x):
        return x

    @task(trigger_rule="all_done")
    def after(values):
        return "ran"

    after(each.override(task_id="each_of_nothing").expand(x=nothing()))
    each.override(task_id="each_of_too_many").expand(x=too_many())
"""

DAG_IDS = (
    "partitions_mapped",
    "group_mapped",
    "kwargs_and_cross_product",
    "empty_and_too_wide",
    "partitions",  # docs/mapping.md's example
)
DOC = REPO / "docs" / "mapping.md"


def _states(dag_id: str) -> dict[str, str | None]:
    return {
        (task_id if index < 0 else f"{task_id}[{index}]"): state
        for task_id, index, state in TaskInstance.objects.filter(dag_id=dag_id).values_list(
            "task_id", "map_index", "state"
        )
    }


def _returned(dag_id: str, task_id: str, map_index: int = -1):
    return XCom.objects.get(
        dag_id=dag_id, task_id=task_id, map_index=map_index, key="return_value"
    ).value


def _ended() -> bool:
    task_instances_advance()  # the scheduler's pass
    return not DagRun.objects.exclude(state__in=["success", "failed"]).exists()


def test_mapped_dag_files_expand_run_and_reduce_as_under_airflow(
    airflow_sdk,  # noqa: F811
    start_worker,
    settings,
    tmp_path,
):
    folder = tmp_path / "dags"
    folder.mkdir()
    (folder / "mapped.py").write_text(textwrap.dedent(DAGS))
    (doc_example,) = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    (folder / "partitions.py").write_text(doc_example)
    loaded = dags_folder_load(folder, settings=settings, parser_home=tmp_path / "parser_home")
    assert set(Dag.objects.values_list("dag_id", flat=True)) == set(DAG_IDS), loaded
    dags_set_paused(dag_ids=list(DAG_IDS), is_paused=False)

    worker = start_worker(
        "--concurrency",
        "4",
        env={
            "AIRFLOW_HOME": str(tmp_path / "airflow_home"),
            "AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": "1",
        },
    )
    try:
        for dag_id in DAG_IDS:
            dag_run_trigger(dag_id=dag_id, run_id="r1", conf={"source": "test"})
        wait_until(_ended, timeout=600, what=f"the runs\n{worker.output()[-20000:]}")

        # an expansion over an XCom of 5, one failing: the all_done join runs, all_success not
        partitions = _states("partitions_mapped")
        assert partitions == {
            "list_partitions": "success",
            **{f"load[{i}]": "failed" if i == 3 else "success" for i in range(5)},
            "report": "success",
            "publish": "upstream_failed",
        }, worker.output()[-20000:]
        assert _returned("partitions_mapped", "report") == [1, 2, 3, 5]
        labels = dict(
            TaskInstance.objects.filter(dag_id="partitions_mapped", task_id="load").values_list(
                "map_index", "rendered_map_index"
            )
        )
        assert labels == {i: f"2026-12-0{i + 1}" for i in range(5)}

        # a mapped task group runs per map index: the bad table fails alone
        assert _states("group_mapped") == {
            **{f"per_table.extract[{i}]": "success" for i in range(3)},
            "per_table.check[0]": "success",
            "per_table.check[1]": "failed",
            "per_table.check[2]": "success",
            "summary": "success",
        }
        assert _returned("group_mapped", "summary") == ["ITEMS:ROWS", "ORDERS:ROWS"]

        # expand_kwargs over a mapped XCom, a cross product, reduces over every map index
        kwargs = _states("kwargs_and_cross_product")
        assert [kwargs[f"add[{i}]"] for i in range(2)] == ["success"] * 2
        assert [kwargs[f"times[{i}]"] for i in range(6)] == ["success"] * 6
        assert _returned("kwargs_and_cross_product", "sum_added") == 33
        assert _returned("kwargs_and_cross_product", "sum_crossed") == 660

        # zero-length: skipped; too wide: the pusher fails with Airflow's reason
        empty = _states("empty_and_too_wide")
        assert empty["each_of_nothing"] == "skipped"
        assert empty["after"] == "success"
        assert empty["too_many"] == "failed"
        assert empty["each_of_too_many"] == "upstream_failed"
        assert DagRun.objects.get(dag_id="kwargs_and_cross_product").state == "success"

        # the docs' example: a reduce over every map index, each labelled
        assert _states("partitions") == {
            "list_partitions": "success",
            **{f"load[{i}]": "success" for i in range(3)},
            "report": "success",
        }
        assert _returned("partitions", "report") == 30
        assert sorted(
            TaskInstance.objects.filter(dag_id="partitions", task_id="load").values_list(
                "rendered_map_index", flat=True
            )
        ) == ["2026-12-01", "2026-12-02", "2026-12-03"]

        # a clear of one map index re-runs only it
        before = {
            ti.map_index: (ti.pk, ti.try_number)
            for ti in TaskInstance.objects.filter(dag_id="partitions_mapped", task_id="load")
        }
        cleared = task_instances_clear(
            task_instances=task_instances_select(
                dag_id="partitions_mapped", run_id="r1", task_id="load", map_index=3
            )
        )
        assert [c.label for c in cleared.cleared] == ["partitions_mapped.load[3] @ r1"]
        time.sleep(0.1)
        wait_until(_ended, timeout=300, what=f"the cleared run\n{worker.output()[-20000:]}")
        after = {
            ti.map_index: (ti.pk, ti.try_number)
            for ti in TaskInstance.objects.filter(dag_id="partitions_mapped", task_id="load")
        }
        assert {i: after[i] for i in (0, 1, 2, 4)} == {i: before[i] for i in (0, 1, 2, 4)}
        assert after[3][1] == before[3][1] + 1
        assert _states("partitions_mapped")["load[3]"] == "failed"  # still corrupt
    finally:
        worker.process.terminate()
        worker.wait(timeout=60)
