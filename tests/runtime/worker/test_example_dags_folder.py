"""``examples/dags``, the DAG folder ``make run`` loads (issue 40 item 4), runs end to end:
loaded by ``declare_dags --dags-folder``, its producers triggered, the scheduler makes the
consumers' runs (on the asset, and on the alias that the producer resolves at run time), a
real worker runs every task with Airflow's task SDK, and every run succeeds."""

from __future__ import annotations

import importlib.util

import pytest

from assets_app.models import AssetEvent, Dag, DagRun, TaskInstance
from assets_app.services.dags.declare import dags_set_paused
from assets_app.services.runs.dag_runs import dag_run_trigger
from assets_app.services.scheduling.scheduler import scheduler_pass
from tests.executionapi.conftest import airflow_sdk  # noqa: F401 (a fixture)
from tests.live_server import REPO
from tests.runtime.worker.conftest import dags_folder_load, wait_until

pytestmark = pytest.mark.slow

if importlib.util.find_spec("airflow.sdk") is None:  # pragma: no cover
    pytest.skip("apache-airflow-task-sdk is not installed", allow_module_level=True)

FOLDER = REPO / "examples" / "dags"
DAG_IDS = {"orders_export", "orders_report", "daily_export_by_alias", "load_daily_export"}
FINISHED = ("success", "failed")


def test_the_example_dag_folder_loads_and_runs(
    airflow_sdk,  # noqa: F811
    start_worker,
    settings,
    tmp_path,
):
    out = dags_folder_load(FOLDER, settings=settings, parser_home=tmp_path / "parser_home")
    assert "2 declared, 0 unchanged, 0 with import errors" in out, out
    assert set(Dag.objects.values_list("dag_id", flat=True)) == DAG_IDS
    assert Dag.objects.get(dag_id="orders_export").tags == ["orders"]
    dags_set_paused(dag_ids=DAG_IDS, is_paused=False)

    worker = start_worker(
        env={
            "AIRFLOW_HOME": str(tmp_path / "airflow_home"),
            "AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": "1",
        },
    )
    producers = [
        dag_run_trigger(dag_id="orders_export", run_id="manual__orders"),
        dag_run_trigger(dag_id="daily_export_by_alias", run_id="manual__alias"),
    ]

    def all_done() -> bool:
        scheduler_pass()  # the producers' events become the consumers' runs
        runs = list(DagRun.objects.all())
        return {r.dag_id for r in runs} == DAG_IDS and all(r.state in FINISHED for r in runs)

    try:
        wait_until(all_done, timeout=400, what=f"every run\n{worker.output()}")
    finally:
        worker.process.terminate()
        worker.wait(timeout=60)

    assert {(r.dag_id, r.state) for r in DagRun.objects.all()} == {
        (dag_id, "success") for dag_id in DAG_IDS
    }, worker.output()
    assert set(TaskInstance.objects.values_list("state", flat=True)) == {"success"}
    assert {p.pk for p in producers} <= set(DagRun.objects.values_list("pk", flat=True))
    # the alias producer's event is on the asset it chose at run time, through the alias
    (alias_event,) = AssetEvent.objects.filter(source_dag_id="daily_export_by_alias")
    assert alias_event.asset.uri.startswith("s3://warehouse/exports/")
    assert list(alias_event.source_aliases.values_list("name", flat=True)) == ["daily-exports"]
    assert alias_event.extra == {"rows": 42}
