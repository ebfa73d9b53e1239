"""Issue 20, Deliver 4: Airflow's own example DAG files run in the registry as under Airflow.

Each group of example files (shipped in ``apache-airflow-core``) is copied unchanged into a
DAGs folder and loaded by ``manage.py declare_dags --dags-folder``; every DAG is unpaused,
every DAG that is not asset-scheduled is triggered, and a real ``manage.py worker`` (Airflow's
task SDK, several slots) plus scheduler passes run everything until each run finished,
asset-triggered consumers included. Every task instance's final state is then compared with
``airflow_reference/states.json``: what Airflow itself gave for the same file under
``airflow dags test`` (recorded by ``airflow_reference/record.py``, never written by hand).

What the registry does not do as Airflow does is listed here by name — ``DIFFERENCES`` (a task
whose final state differs, and why) and ``REFUSED`` (a file the loader refuses, with the
message it must give) — and the table in ``docs/dag-files.md`` must agree with these lists
(``test_docs_table_agrees``). Skipped without ``apache-airflow-core``."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import re
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from assets_app.models import Dag, DagImportError, DagRun, TaskInstance
from assets_app.services.dags.declare import dags_set_paused
from assets_app.services.runs.dag_runs import dag_run_trigger
from assets_app.services.scheduling.scheduler import scheduler_pass
from tests.executionapi.conftest import airflow_sdk  # noqa: F401 (a fixture)
from tests.live_server import REPO, server_env
from tests.runtime.worker.airflow_reference.record import ti_key

HERE = Path(__file__).resolve().parent
REFERENCE = json.loads((HERE / "airflow_reference" / "states.json").read_text())
DOCS = REPO / "docs" / "dag-files.md"
FINISHED = ("success", "failed")
# seconds for a group's runs to finish: each task is a fresh Python process importing Airflow's
# SDK (~3-5 s of CPU on this 2-core machine), and a group runs up to ~90 task instances
WAIT = 900

#: One DAGs folder per group of files that can share one (each group is one test).
GROUPS: dict[str, tuple[str, ...]] = {
    "assets": (
        "example_asset_alias.py",
        "example_asset_alias_with_no_taskflow.py",
        "example_assets.py",
        "example_asset_decorator.py",
        "example_outlet_event_extra.py",
    ),
    # declares the asset of example_outlet_event_extra.py's producers as a plain inlet
    "inlet_events": ("example_inlet_event_extra.py",),
    "tutorials_xcom": (
        "tutorial.py",
        "tutorial_taskflow_api.py",
        "tutorial_taskflow_templates.py",
        "example_xcom.py",
        "example_xcomargs.py",
    ),
    "branching": (
        "example_branch_labels.py",
        "example_nested_branch_dag.py",
        "example_skip_dag.py",
        "example_task_group_decorator.py",
        "example_complex.py",
        "example_setup_teardown_taskflow.py",
        "example_failed_dag.py",
    ),
    # reads dag_run.conf (empty here: each DAG is triggered without one; with a conf, and by
    # its controller's TriggerDagRunOperator, in test_worker_conf_params.py)
    "trigger": ("example_trigger_target_dag.py",),
    # dynamic task mapping (issue 38): literals, a mapped task group, second order, expansions
    # over an upstream's XCom, a reduce over every map index
    "mapping": (
        "example_dynamic_task_mapping.py",
        "example_dynamic_task_mapping_with_no_taskflow_operators.py",
        "example_task_state_store_mapped.py",
        "example_params_trigger_ui.py",
    ),
    # its TimeDeltaSensor defers: a manage.py triggerer runs beside the worker
    "deferrable": ("example_time_delta_sensor_async.py",),
    # asset watchers (AIP-82): its DAG is scheduled on three watched assets (all of them)
    "watchers": ("example_asset_with_watchers.py",),
}
#: Groups whose tasks defer or whose assets have watchers, run with a ``manage.py triggerer``
#: process too.
TRIGGERER_GROUPS = frozenset({"deferrable", "watchers"})
#: The files a group's asset watchers watch (Airflow's example's paths), created once the
#: triggerer runs every watcher's trigger: each trigger deletes its file and sends the event
#: that becomes an asset event (as ``airflow_reference/record.py`` fires them in Airflow).
WATCHED_FILES: dict[str, tuple[str, ...]] = {
    "watchers": ("/tmp/test", "/tmp/region-flags/us.flag", "/tmp/region-flags/eu.flag"),  # noqa: S108
}

#: (file, dag_id, task_id) -> (the registry's final state, why it differs from Airflow's).
DIFFERENCES: dict[tuple[str, str, str], tuple[str, str]] = {}

#: file -> a part of the loader's refusal message (the file's import error).
REFUSED: dict[str, str] = {
    # setup/teardown tasks (runtime/dag_contract.py): their run-state and clearing rules are
    # not honoured, so the file is refused rather than run as if they were plain tasks
    "example_setup_teardown_taskflow.py": (
        "DAG 'example_setup_teardown_taskflow', task 'outer_setup', attribute 'is_setup': "
        "setup and teardown tasks"
    ),
}


def test_every_example_file_is_in_one_group_and_in_the_reference():
    grouped = [name for names in GROUPS.values() for name in names]
    assert sorted(grouped) == sorted(set(grouped))
    assert set(grouped) == set(REFERENCE["files"])
    assert {f for f, _, _ in DIFFERENCES} <= set(grouped)
    assert set(REFUSED) <= set(grouped)


def _reference_states(name: str, dag_id: str) -> dict[str, str]:
    """Airflow's final task states for one DAG, with the registry's named differences."""
    tasks = dict(REFERENCE["files"][name][dag_id]["tasks"])
    for (file, dag, task), (state, _) in DIFFERENCES.items():
        if (file, dag) == (name, dag_id):
            tasks[task] = state
    return tasks


def _unfinished() -> str:
    tis = TaskInstance.objects.exclude(dag_run__state__in=FINISHED).order_by("dag_id", "task_id")
    return "\n".join(f"  {t.dag_id}.{t.task_id} ({t.run_id}): {t.state}" for t in tis)


def _run_everything(expected_dags: set[str], worker: Any) -> None:
    """Scheduler passes until every expected DAG has run, every run finished and a pass
    creates nothing more; a timeout names the unfinished task instances."""
    deadline = time.monotonic() + WAIT
    while True:
        created = scheduler_pass().created
        ran = set(DagRun.objects.values_list("dag_id", flat=True))
        open_runs = DagRun.objects.exclude(state__in=FINISHED).exists()
        if not created and not open_runs and expected_dags <= ran:
            return
        if time.monotonic() > deadline:
            raise AssertionError(
                f"runs not finished after {WAIT} s; DAGs that never ran: "
                f"{sorted(expected_dags - ran)}; unfinished task instances:\n{_unfinished()}"
                f"\n--- worker output ---\n{worker.output()[-20000:]}"
            )
        time.sleep(0.3)


def _watched_files_create(paths: tuple[str, ...]) -> None:
    """Create the watched files once every asset watcher's trigger runs in the triggerer."""
    if not paths:
        return
    from assets_app.models import AssetWatcher, Trigger

    deadline = time.monotonic() + 120
    while Trigger.objects.filter(asset_watchers__isnull=False, triggerer__isnull=True).exists() or (
        not AssetWatcher.objects.exists()
    ):
        if time.monotonic() > deadline:
            raise AssertionError("the asset watchers' triggers were not claimed in 120 s")
        time.sleep(0.3)
    time.sleep(1)  # the claiming pass starts them
    for path in map(Path, paths):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("deleted by the watcher's trigger")


def _start_triggerer(tmp_path: Path) -> subprocess.Popen[bytes]:
    """``manage.py triggerer`` against the test database (docs/triggerer.md)."""
    with (tmp_path / "triggerer.out").open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "manage.py", "triggerer", "--interval", "0.5"],
            cwd=REPO,
            env=server_env(AIRFLOW_HOME=str(tmp_path / "airflow_home")),
            stdout=out,
            stderr=subprocess.STDOUT,
        )


@pytest.mark.slow
# On PostgreSQL only: the comparison is of task semantics (trigger rules, branching, run
# states), written once above the database, and it takes ~10 minutes of real task processes;
# the same worker and scheduler paths run on SQLite in test_example_asset_alias.py and the
# other tests/runtime/worker tests.
@pytest.mark.postgres
@pytest.mark.timeout(WAIT + 300)
@pytest.mark.parametrize("group", list(GROUPS))
def test_airflow_example_dags_end_as_under_airflow(
    group: str,
    airflow_sdk,  # noqa: F811
    start_worker,
    settings,
    tmp_path,
):
    if importlib.util.find_spec("airflow.example_dags") is None:  # pragma: no cover
        pytest.skip("apache-airflow-core is not installed")
    import airflow.example_dags

    examples = Path(airflow.example_dags.__path__[0])
    settings.DAG_PARSER_HOME = tmp_path / "parser_home"
    settings.DAG_PARSER_PYTHON = sys.executable
    folder = tmp_path / "dags"
    folder.mkdir()
    files = {name: Path(shutil.copy(examples / name, folder / name)) for name in GROUPS[group]}

    # given the group's files, unchanged, loaded from their folder
    out = StringIO()
    refused = set(REFUSED) & set(files)  # declare_dags exits 1 when a file fails to import
    with pytest.raises(CommandError) if refused else contextlib.nullcontext():
        call_command("declare_dags", "--dags-folder", str(folder), stdout=out)
    errors = {Path(e.filename).name: e.stacktrace for e in DagImportError.objects.all()}
    assert set(errors) == set(REFUSED) & set(files), out.getvalue()
    for name, part in REFUSED.items():
        if name in files:
            assert part in errors[name], errors[name]
    runnable = [name for name in files if name not in REFUSED]
    file_of = {
        dag_id: name for name in runnable for dag_id in REFERENCE["files"][name]
    }  # the DAGs Airflow ran
    declared = dict(Dag.objects.values_list("dag_id", "fileloc"))
    assert set(file_of) <= set(declared), out.getvalue()
    assert {Path(declared[d]).name for d in file_of} == set(runnable) or not file_of
    assert dags_set_paused(dag_ids=set(declared), is_paused=False) == len(declared)

    # when every DAG that is not asset-scheduled is triggered, and a worker and scheduler
    # passes run what becomes runnable (the asset-triggered consumers included)
    worker = start_worker(
        "--concurrency",
        "4",
        env={
            "AIRFLOW_HOME": str(tmp_path / "airflow_home"),
            "AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": "1",
        },
    )
    triggerer = _start_triggerer(tmp_path) if group in TRIGGERER_GROUPS else None
    for dag in Dag.objects.filter(asset_expression__isnull=True).order_by("dag_id"):
        dag_run_trigger(dag_id=dag.dag_id)
    try:
        _watched_files_create(WATCHED_FILES.get(group, ()))
        _run_everything(set(file_of), worker)
    finally:
        worker.process.terminate()
        worker.wait(timeout=60)
        if triggerer is not None:
            triggerer.terminate()
            triggerer.wait(timeout=60)

    # then exactly the DAGs Airflow ran have run (none of the never-due consumers), and every
    # run's task instances ended as Airflow's did, but for the named differences
    ran: dict[str, list[dict[str, str]]] = defaultdict(list)
    by_run: dict[int, dict[str, str]] = defaultdict(dict)
    for run_pk, task_id, map_index, state in TaskInstance.objects.values_list(
        "dag_run", "task_id", "map_index", "state"
    ):
        by_run[run_pk][ti_key(task_id, map_index)] = state
    for run in DagRun.objects.order_by("pk"):
        ran[run.dag_id].append(by_run[run.pk])
    assert set(ran) == set(file_of), worker.output()[-20000:]
    mismatches = [
        f"{file_of[dag_id]} {dag_id}: registry {states} != Airflow {expected}"
        for dag_id, runs in sorted(ran.items())
        for states in runs
        if states != (expected := _reference_states(file_of[dag_id], dag_id))
    ]
    assert not mismatches, "\n".join(mismatches) + "\n" + worker.output()[-20000:]


# --- the docs' table ---------------------------------------------------------------------------

ROW = re.compile(r"^\| `(?P<file>[\w.]+\.py)` \| (?P<dags>[^|]*) \| (?P<result>[^|]*) \|")


def _docs_rows() -> dict[str, tuple[str, str]]:
    rows = {}
    for line in DOCS.read_text().splitlines():
        if m := ROW.match(line):
            rows[m["file"]] = (m["dags"].strip(), m["result"].strip())
    return rows


def test_docs_table_agrees():
    """docs/dag-files.md's table has one row per example file, naming the DAGs Airflow ran
    and the result this module expects: refused, differs (names the differing tasks) or
    matches Airflow."""
    rows = _docs_rows()
    assert set(rows) == set(REFERENCE["files"])
    for name, (dags, result) in rows.items():
        assert set(re.findall(r"`([\w.-]+)`", dags)) == set(REFERENCE["files"][name]), name
        differing = sorted({f"{d}.{t}" for f, d, t in DIFFERENCES if f == name})
        if name in REFUSED:
            assert result == "refused", name
        elif differing:
            assert result.startswith("differs"), name
            assert set(re.findall(r"`([\w.-]+)`", result)) == set(differing), name
        else:
            assert result == "matches Airflow", name
