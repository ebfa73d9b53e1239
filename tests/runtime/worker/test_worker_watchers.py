"""Asset watchers (AIP-82) in real processes (docs/triggerer.md "Asset watchers"): the page's
example, a real Airflow DAG file whose asset has a ``FileDeleteTrigger`` watcher, loaded by
the DAG-file loader; a real ``manage.py triggerer`` runs the trigger, a real scheduler and
worker run the consumer DAG: each deletion of the file is exactly one asset event and one
consumer run. Two triggerers, the one running the watcher killed with ``kill -9``: the other
takes the trigger over and the next deletion is registered once. Skipped without Airflow's
task SDK and core."""

from __future__ import annotations

import importlib.util
import signal
import time
from pathlib import Path

import pytest

from assets_app.models import AssetEvent, AssetWatcher, Dag, DagRun, Trigger, TriggerFiring
from assets_app.services.dags.declare import dags_set_paused
from tests.docs.examples import doc_example
from tests.executionapi.conftest import airflow_sdk  # noqa: F401 (a fixture)
from tests.runtime.worker.conftest import dags_folder_load
from tests.runtime.worker.test_worker_deferred import (
    outputs,
    start_scheduler,
    start_triggerer,
    stop,
    waited,
    worker_env,
)

pytestmark = pytest.mark.slow

if importlib.util.find_spec("airflow.dag_processing") is None:  # pragma: no cover
    pytest.skip("apache-airflow-core is not installed", allow_module_level=True)


@pytest.fixture
def watched_dag(airflow_sdk, server, settings, tmp_path):  # noqa: F811
    folder = tmp_path / "dags"
    folder.mkdir()
    flag = tmp_path / "flag"
    # the example of docs/triggerer.md, watching a file of the test's own
    source = doc_example("asset-watcher").replace("/data/flag", str(flag))
    (folder / "watched.py").write_text(source)
    out = dags_folder_load(folder, settings=settings, parser_home=tmp_path / "parser_home")
    assert list(Dag.objects.values_list("dag_id", flat=True)) == ["on_flag"], out
    dags_set_paused(dag_ids=["on_flag"], is_paused=False)
    assert AssetWatcher.objects.count() == 1
    return flag


def touch_and_wait(flag: Path, count: int, *processes) -> None:
    flag.write_text("x")
    waited(
        lambda: AssetEvent.objects.count() == count and not flag.exists(),
        *processes,
        timeout=120,
        what=f"asset event {count}",
    )


@pytest.mark.timeout(600)
def test_each_deletion_of_the_watched_file_is_one_asset_event_and_one_consumer_run(
    watched_dag, start_worker, marker_dir, tmp_path
):
    triggerer = start_triggerer(tmp_path)
    scheduler = start_scheduler(tmp_path)
    worker = start_worker("--concurrency", "1", env=worker_env(tmp_path))
    processes = (triggerer, scheduler, worker)
    try:
        waited(
            lambda: Trigger.objects.filter(triggerer__isnull=False).exists(),
            *processes,
            timeout=120,
            what="the watcher's trigger claimed",
        )
        for n in (1, 2):
            touch_and_wait(watched_dag, n, *processes)
            waited(
                lambda n=n: DagRun.objects.filter(dag_id="on_flag", state="success").count() == n,
                *processes,
                timeout=240,
                what=f"consumer run {n}",
            )
    finally:
        stop(*processes)

    logs = outputs(*processes)
    events = list(AssetEvent.objects.order_by("pk"))
    assert [e.extra for e in events] == [{"from_trigger": True, "payload": True}] * 2, logs
    assert DagRun.objects.filter(dag_id="on_flag").count() == 2, logs
    assert DagRun.objects.filter(dag_id="on_flag", run_type="asset_triggered").count() == 2
    assert "asset 'flag' watcher 'flag_deleted'" in triggerer.output(), logs


@pytest.mark.timeout(600)
def test_a_triggerer_killed_while_its_watcher_runs_hands_it_over_and_events_register_once(
    watched_dag, tmp_path
):
    first = start_triggerer(tmp_path)
    waited(
        lambda: Trigger.objects.filter(triggerer__isnull=False).exists(),
        first,
        timeout=120,
        what="the watcher's trigger claimed",
    )
    second = start_triggerer(tmp_path)
    try:
        touch_and_wait(watched_dag, 1, first, second)
        # the triggerer running the watcher dies (kill -9: no clean hand-back)
        holder = Trigger.objects.get().triggerer
        doomed = first if holder.pid == first.process.pid else second
        survivor = second if doomed is first else first
        doomed.process.send_signal(signal.SIGKILL)
        doomed.wait(timeout=30)
        waited(
            lambda: Trigger.objects.filter(triggerer__pid=survivor.process.pid).exists(),
            survivor,
            timeout=120,
            what="the trigger taken over",
        )
        touch_and_wait(watched_dag, 2, survivor)
        time.sleep(2)  # nothing more comes
    finally:
        stop(first, second)

    logs = outputs(first, second)
    assert AssetEvent.objects.count() == 2, logs
    assert list(TriggerFiring.objects.order_by("sequence").values_list("sequence", flat=True)) == [
        1,
        2,
    ], logs
    assert "released 1 trigger(s) of dead triggerer(s)" in survivor.output(), logs
