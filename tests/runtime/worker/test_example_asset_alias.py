"""Issue 20's first acceptance item: Airflow's own ``example_asset_alias.py`` (the seed's test
DAG, shipped in ``apache-airflow-core``), loaded from its file by ``manage.py declare_dags
--dags-folder`` with no manifest, runs end to end: both producers are triggered, the scheduler
(``scheduler_pass``) creates the asset-triggered consumer runs, a real ``manage.py worker``
runs every task with Airflow's task SDK, all four DAGs' runs succeed, the consumers' runs
consumed the producers' events, and the alias consumer's task log shows the event it read
through ``inlet_events[AssetAlias("example-alias")]`` (``GET /execution/assets/by-alias`` and
the asset-events route). Skipped without ``apache-airflow-core``/``apache-airflow-task-sdk``."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

from assets_app.models import Asset, AssetEvent, Dag, DagRun, DagTask, TaskInstance
from assets_app.services.dags.declare import dags_set_paused
from assets_app.services.runs.dag_runs import dag_run_trigger
from assets_app.services.scheduling.scheduler import scheduler_pass
from tests.executionapi.conftest import airflow_sdk  # noqa: F401 (a fixture)
from tests.runtime.worker.conftest import dags_folder_load, wait_until

pytestmark = pytest.mark.slow

if importlib.util.find_spec("airflow.example_dags") is None:  # pragma: no cover
    pytest.skip("apache-airflow-core is not installed", allow_module_level=True)

import airflow  # noqa: E402 - only after the skip

EXAMPLE = Path(airflow.__file__).parent / "example_dags" / "example_asset_alias.py"
BUCKET = "s3://bucket/my-task"
ALIAS = "example-alias"
PRODUCER = "asset_s3_bucket_producer"
ALIAS_PRODUCER = "asset_alias_example_alias_producer"
CONSUMER = "asset_s3_bucket_consumer"
ALIAS_CONSUMER = "asset_alias_example_alias_consumer"
DAG_IDS = {PRODUCER, ALIAS_PRODUCER, CONSUMER, ALIAS_CONSUMER}
FINISHED = ("success", "failed")


def consumed(run: DagRun) -> set[tuple[str | None, str]]:
    """(source DAG, asset uri) of the events a run consumed."""
    return set(run.consumed_events.values_list("source_dag_id", "asset__uri"))


def test_airflows_asset_alias_example_runs_from_its_file(
    airflow_sdk,  # noqa: F811
    start_worker,
    settings,
    tmp_path,
):
    # given Airflow's example file, unchanged, alone in a DAGs folder, loaded by the loader
    dags_folder = tmp_path / "dags"
    dags_folder.mkdir()
    dag_file = Path(shutil.copy(EXAMPLE, dags_folder / EXAMPLE.name))
    out = dags_folder_load(dags_folder, settings=settings, parser_home=tmp_path / "parser_home")
    assert "declared" in out, out
    assert set(Dag.objects.values_list("dag_id", flat=True)) == DAG_IDS, out
    assert set(DagTask.objects.values_list("airflow_dag_file", flat=True)) == {
        str(dag_file.resolve())
    }
    # new DAGs load paused (DAGS_ARE_PAUSED_AT_CREATION); turn them all on, as the file says
    assert dags_set_paused(dag_ids=DAG_IDS, is_paused=False) == 4

    # when both producers are triggered and a real worker runs what becomes runnable
    worker = start_worker(
        env={
            "AIRFLOW_HOME": str(tmp_path / "airflow_home"),
            "AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": "1",
        },
    )
    producer_runs = [
        dag_run_trigger(dag_id=PRODUCER, run_id="manual__bucket"),
        dag_run_trigger(dag_id=ALIAS_PRODUCER, run_id="manual__alias"),
    ]

    def producers_done() -> bool:
        return all(DagRun.objects.get(pk=r.pk).state in FINISHED for r in producer_runs)

    def consumers_done() -> bool:
        scheduler_pass()  # the scheduler turns the producers' queued events into runs
        runs = DagRun.objects.filter(dag_id__in=(CONSUMER, ALIAS_CONSUMER))
        return {r.dag_id for r in runs} == {CONSUMER, ALIAS_CONSUMER} and all(
            r.state in FINISHED for r in runs
        )

    try:
        wait_until(producers_done, timeout=400, what=f"the producers\n{worker.output()}")
        wait_until(consumers_done, timeout=400, what=f"the consumers\n{worker.output()}")
        scheduler_pass()  # nothing left queued: no further consumer run is due
    finally:
        worker.process.terminate()
        worker.wait(timeout=60)

    # then every run of the four DAGs, and every task in it, succeeded
    runs = list(DagRun.objects.order_by("pk"))
    assert {(r.dag_id, r.state) for r in runs} == {(d, "success") for d in DAG_IDS}, worker.output()
    assert set(TaskInstance.objects.values_list("dag_id", "task_id", "state")) == {
        (PRODUCER, "produce_asset_events", "success"),
        (ALIAS_PRODUCER, "produce_asset_events_through_asset_alias", "success"),
        (CONSUMER, "consume_asset_event", "success"),
        (ALIAS_CONSUMER, "consume_asset_event_from_asset_alias", "success"),
    }, worker.output()

    # each producer recorded one event on the bucket asset, the alias producer's through the
    # alias (which now resolves to the asset)
    bucket = Asset.objects.get(uri=BUCKET)
    events = {e.source_dag_id: e for e in AssetEvent.objects.filter(asset=bucket)}
    assert set(events) == {PRODUCER, ALIAS_PRODUCER}
    assert list(events[ALIAS_PRODUCER].source_aliases.values_list("name", flat=True)) == [ALIAS]
    assert not events[PRODUCER].source_aliases.exists()
    assert list(bucket.aliases.values_list("name", flat=True)) == [ALIAS]

    # the alias consumer ran once, on the event emitted through its alias only (as Airflow:
    # a direct event on the alias's asset is not an alias event)
    (alias_run,) = (r for r in runs if r.dag_id == ALIAS_CONSUMER)
    assert alias_run.run_type == "asset_triggered"
    assert consumed(alias_run) == {(ALIAS_PRODUCER, BUCKET)}
    # the bucket consumer's runs (one or two, as the two events arrived) consumed both events,
    # each exactly once
    bucket_runs = [r for r in runs if r.dag_id == CONSUMER]
    assert all(r.run_type == "asset_triggered" for r in bucket_runs)
    taken = [e for r in bucket_runs for e in r.consumed_events.values_list("pk", flat=True)]
    assert sorted(taken) == sorted(e.pk for e in events.values())

    # and the alias consumer's task log (under the worker's --log-dir) shows the event it read
    (alias_ti,) = TaskInstance.objects.filter(dag_run=alias_run)
    log_dir = tmp_path / "task_logs" / ALIAS_CONSUMER
    (log_path,) = log_dir.glob(f"*/{alias_ti.task_id}/attempt={alias_ti.try_number}.log")
    log = log_path.read_text(errors="replace")
    event = events[ALIAS_PRODUCER]
    printed = [line for line in log.splitlines() if f"source_dag_id='{ALIAS_PRODUCER}'" in line]
    assert printed, log
    assert f"id={event.pk} " in printed[0], log
    assert f"uri='{BUCKET}'" in printed[0], log
    assert f"source_run_id='{producer_runs[1].run_id}'" in printed[0], log
