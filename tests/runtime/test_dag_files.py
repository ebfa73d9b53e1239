"""The DAG-file loader (``runtime.dag_processing``, ``runtime/dag_parse.py``, storing through
``assets_app.services.dags.dag_files``) against Airflow itself: real DAG files parsed by
Airflow's ``DagBag`` in a subprocess.

Airflow's own example DAGs are loaded and what the registry stores is compared, DAG by DAG and
task by task, with what Airflow's serialized DAGs say (``dagbag_facts.py``, run under the same
interpreter), not with hand-written expectations. Skipped without ``apache-airflow-core``."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from assets_app.models import (
    Asset,
    AssetActive,
    Dag,
    DagImportError,
    DagTask,
    TaskInletAssetReference,
    TaskOutletAssetReference,
)
from assets_app.services.dags.dag_files import FileOutcome
from assets_app.services.dags.declare import dags_set_paused
from runtime.dag_processing import dag_files_list, dag_folder_load
from tests.live_server import REPO, server_env

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

if importlib.util.find_spec("airflow.dag_processing") is None:  # pragma: no cover
    pytest.skip("apache-airflow-core is not installed", allow_module_level=True)

import airflow  # noqa: E402 - only after the skip

EXAMPLE_DAGS = Path(airflow.__file__).parent / "example_dags"
HERE = Path(__file__).resolve().parent
#: Airflow's example DAG files the registry runs (issue 20's list, those in 3.3.2).
EXAMPLES = (
    "example_asset_alias.py",
    "example_asset_alias_with_no_taskflow.py",
    "example_assets.py",
    "example_asset_decorator.py",
    "example_inlet_event_extra.py",
    "example_outlet_event_extra.py",
    "tutorial.py",
    "tutorial_taskflow_api.py",
    "tutorial_taskflow_templates.py",
    "example_xcom.py",
    "example_xcomargs.py",
    "example_branch_labels.py",
    "example_nested_branch_dag.py",
    "example_skip_dag.py",
    "example_task_group_decorator.py",
    "example_complex.py",
    "example_failed_dag.py",
    "example_dag_decorator.py",
)

CONFLICTING = "example_outlet_event_extra.py"


@pytest.fixture(autouse=True)
def _parser(settings, tmp_path):
    settings.DAG_PARSER_HOME = tmp_path / "parser_home"
    settings.DAG_PARSER_PYTHON = sys.executable


def airflow_facts(files: list[Path], tmp_path: Path) -> dict[str, Any]:
    out = tmp_path / "facts.json"
    subprocess.run(
        [sys.executable, str(HERE / "dagbag_facts.py"), str(out), *map(str, files)],
        check=True,
        capture_output=True,
        env={"AIRFLOW_HOME": str(tmp_path / "facts_home"), "PATH": "/usr/bin:/bin"},
        timeout=600,
    )
    facts: dict[str, Any] = json.loads(out.read_text())
    return facts


def without_groups(expression: Any) -> Any:
    """Airflow's ``as_expression()`` less the group (the stored condition keys name and uri)."""
    if isinstance(expression, dict):
        return {
            key: without_groups(value)
            for key, value in expression.items()
            if key not in ("group", "id")
        }
    if isinstance(expression, list):
        return [without_groups(value) for value in expression]
    return expression


def expected_timetable(facts: dict[str, Any]) -> dict[str, Any] | None:
    kind = facts["kind"]
    if kind == "AssetOrTimeSchedule":
        return expected_timetable(facts["time"])
    if kind == "CronTriggerTimetable":
        return {
            "cron": facts["serialized"]["expression"],
            "timezone": facts["serialized"]["timezone"],
        }
    if kind == "DeltaTriggerTimetable":
        return {"delta": facts["serialized"]["delta"], "timezone": "UTC"}
    if kind == "OnceTimetable":
        return {"once": True, "timezone": "UTC"}
    return None


def assert_dag_matches(dag: Dag, facts: dict[str, Any], *, fileloc: Path) -> None:
    # the DAG row
    assert dag.fileloc == str(fileloc)
    assert not dag.is_stale
    expression = facts["timetable"].get("assets")
    assert dag.asset_expression == (without_groups(expression) if expression else None)
    assert dag.timetable == expected_timetable(facts["timetable"])
    assert sorted(dag.tags) == facts["tags"]
    assert (dag.max_active_runs, dag.max_active_tasks, dag.catchup) == (
        facts["max_active_runs"],
        facts["max_active_tasks"],
        facts["catchup"],
    )
    assert (dag.start_date.isoformat() if dag.start_date else None) == facts["start_date"]
    assert dag.is_paused == (facts["is_paused_upon_creation"] is not False)  # Airflow's default
    # its tasks: ids, edges, trigger rules, retries, and the file the worker runs
    tasks = {task.task_id: task for task in DagTask.objects.filter(dag=dag)}
    assert dag.task_ids == list(facts["tasks"])
    assert set(tasks) == set(facts["tasks"])
    for task_id, want in facts["tasks"].items():
        task = tasks[task_id]
        assert sorted(task.upstream) == want["upstream"], task_id
        assert task.trigger_rule == want["trigger_rule"], task_id
        assert (task.retries, task.retry_delay) == (want["retries"], want["retry_delay"])
        assert task.airflow_dag_file == str(fileloc)
        for model, kind in (
            (TaskOutletAssetReference, "outlets"),
            (TaskInletAssetReference, "inlets"),
        ):
            stored = sorted(
                model._default_manager.filter(dag=dag, task_id=task_id).values_list(
                    "asset__name", "asset__uri"
                )
            )
            assets = sorted((leaf[1], leaf[2]) for leaf in want[kind] if leaf[0] == "asset")
            assert stored == assets, (task_id, kind)


@pytest.mark.timeout(900)
def test_airflows_example_dags_load_as_airflow_reads_them(tmp_path):
    # given a DAGs folder holding Airflow's example DAG files
    folder = tmp_path / "dags"
    folder.mkdir()
    for name in EXAMPLES:
        shutil.copy(EXAMPLE_DAGS / name, folder / name)
    files = dag_files_list(folder)
    assert [path.name for path in files] == sorted(EXAMPLES)

    # when the registry loads the folder
    result = dag_folder_load(folder=folder)

    # then every file declared but one: example_outlet_event_extra.py's asset named
    # "test-asset" has the uri of example_inlet_event_extra.py's, which the registry refuses
    # (two active assets with one uri); its file is an import error saying so
    outcomes = {Path(r.path).name: r for r in result.files}
    refused = outcomes.pop(CONFLICTING)
    assert refused.outcome == FileOutcome.IMPORT_ERROR
    assert "would both be active with the same uri 's3://output/1.txt'" in refused.error
    assert {r.outcome for r in outcomes.values()} == {FileOutcome.DECLARED}, [
        (r.path, r.error) for r in outcomes.values() if r.error
    ]
    assert list(DagImportError.objects.values_list("filename", flat=True)) == [refused.path]
    # and each DAG and task is stored as Airflow's own DagBag has them
    facts = airflow_facts(files, tmp_path)
    for path in files:
        if path.name == CONFLICTING:
            assert not Dag.objects.filter(fileloc=str(path)).exists()
            continue
        dag_facts = facts[str(path)]["dags"]
        assert facts[str(path)]["import_errors"] == {}
        stored = Dag.objects.filter(fileloc=str(path))
        assert sorted(dag.dag_id for dag in stored) == sorted(dag_facts), path.name
        for dag in stored:
            assert_dag_matches(dag, dag_facts[dag.dag_id], fileloc=path)

    # and loading the unchanged folder again changes no row (the refused file's declaration
    # is tried again in a savepoint, rolled back: the conflict may have gone meanwhile)
    before = snapshot()
    again = dag_folder_load(folder=folder)
    assert {r.outcome for r in again.files} == {
        FileOutcome.UNCHANGED,
        FileOutcome.IMPORT_ERROR_UNCHANGED,
    }
    assert snapshot() == before


def snapshot() -> list[list[dict[str, Any]]]:
    return [
        list(model._default_manager.order_by("pk").values())
        for model in (Dag, DagTask, DagImportError, Asset, AssetActive, TaskOutletAssetReference)
    ]


def write(path: Path, source: str) -> Path:
    path.write_text(textwrap.dedent(source))
    return path


GOOD = """
    from airflow.sdk import DAG, Asset, task

    with DAG(dag_id="loader_good", schedule=None, tags=["{tag}"]):

        @task(outlets=[Asset("s3://loader/good")], retries={retries})
        def produce():
            pass

        @task(trigger_rule="all_done")
        def report():
            pass

        produce() >> report()
"""


def load(folder: Path) -> dict[str, Any]:
    return {Path(r.path).name: r for r in dag_folder_load(folder=folder).files}


def writes_during(call: Any) -> tuple[Any, list[str]]:
    with CaptureQueriesContext(connection) as queries:
        result = call()
    return result, [
        q["sql"]
        for q in queries.captured_queries
        if q["sql"].lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE"))
    ]


def test_a_broken_file_keeps_its_dags_last_good_version_until_fixed(tmp_path, settings):
    # given a good file loaded, then unpaused by the operator
    settings.DAGBAG_IMPORT_TIMEOUT = 3
    folder = tmp_path / "dags"
    folder.mkdir()
    good = write(folder / "good.py", GOOD.format(tag="v1", retries=2))
    assert load(folder)["good.py"].outcome == FileOutcome.DECLARED
    assert Dag.objects.get(dag_id="loader_good").is_paused  # Airflow's pause at creation
    dags_set_paused(dag_ids=["loader_good"], is_paused=False)
    before = snapshot()

    # when it gets a syntax error, and another file sleeps past the import timeout
    good.write_text(good.read_text() + "\ndef broken(:\n")
    write(
        folder / "slow.py",
        """
        import time
        from airflow.sdk import DAG
        time.sleep(60)
        """,
    )
    results = load(folder)

    # then each is an import error with Airflow's traceback; the DAG keeps its version
    assert results["good.py"].outcome == FileOutcome.IMPORT_ERROR
    assert results["slow.py"].outcome == FileOutcome.IMPORT_ERROR
    errors = dict(DagImportError.objects.values_list("filename", "stacktrace"))
    assert "SyntaxError" in errors[str(good)]
    assert "DagBag import timeout for" in errors[str(folder / "slow.py")]
    after = snapshot()  # every table but import_error as before
    assert after[:2] == before[:2]
    assert after[3:] == before[3:]

    # when it is fixed (a new version) and the slow file removed
    write(good, GOOD.format(tag="v2", retries=1))
    (folder / "slow.py").unlink()
    results = load(folder)

    # then its import error goes, the new version is stored, the operator's pause is kept
    assert results["good.py"].outcome == FileOutcome.DECLARED
    assert not DagImportError.objects.exists()
    dag = Dag.objects.get(dag_id="loader_good")
    assert (dag.tags, dag.is_paused) == (["v2"], False)
    assert DagTask.objects.get(dag=dag, task_id="produce").retries == 1
    assert DagTask.objects.get(dag=dag, task_id="report").upstream == ["produce"]

    # and an unchanged folder is read, never written
    results, writes = writes_during(lambda: load(folder))
    assert results["good.py"].outcome == FileOutcome.UNCHANGED
    assert writes == []

    # and a removed file's DAGs go stale
    good.unlink()
    results = load(folder)
    assert results["good.py"].outcome == FileOutcome.STALE
    assert Dag.objects.get(dag_id="loader_good").is_stale


BAD_WATCHER = """
from airflow.providers.standard.triggers.temporal import TimeDeltaTrigger
from airflow.sdk import DAG, Asset, AssetWatcher, task


class BadWatcherTrigger(TimeDeltaTrigger):
    pass


watcher = AssetWatcher.__new__(AssetWatcher)  # past the SDK's own check, as an old SDK would
object.__setattr__(watcher, "name", "clock")
object.__setattr__(watcher, "trigger", BadWatcherTrigger(__import__("datetime").timedelta(1)))
with DAG("bad_watcher", schedule=[Asset("watched", watchers=[watcher])]):
    task(lambda: None, task_id="t")()
"""


def test_features_the_registry_cannot_run_are_refused_at_load(tmp_path):
    # given files using an asset watcher whose trigger is no event trigger, a partitioned
    # schedule and setup/teardown tasks (an attribute the contract refuses,
    # runtime/dag_contract.py)
    folder = tmp_path / "dags"
    folder.mkdir()
    (folder / "bad_watcher.py").write_text(BAD_WATCHER)
    for name in (
        "example_asset_partition.py",
        "example_setup_teardown_taskflow.py",
    ):
        shutil.copy(EXAMPLE_DAGS / name, folder / name)

    # when the folder is loaded
    results = load(folder)

    # then each file is an import error naming the DAG, the task and the feature; no DAG
    assert {r.outcome for r in results.values()} == {FileOutcome.IMPORT_ERROR}
    assert not Dag.objects.exists()
    errors = {
        Path(name).name: text
        for name, text in DagImportError.objects.values_list("filename", "stacktrace")
    }
    assert (
        "DAG 'bad_watcher', asset 'watched', watcher 'clock': its trigger BadWatcherTrigger is "
        "not a BaseEventTrigger" in errors["bad_watcher.py"]
    )
    assert "partitioned schedules" in errors["example_asset_partition.py"]
    assert (
        "DAG 'example_setup_teardown_taskflow', task 'outer_teardown', attribute 'is_teardown': "
        "setup and teardown tasks" in errors["example_setup_teardown_taskflow.py"]
    )


def test_a_file_that_hangs_past_the_processor_timeout_is_an_import_error(tmp_path, settings):
    # given a file that ignores the import timeout's alarm and hangs (its own test, with a
    # short timeout: real files next to it need the default one on a loaded machine)
    settings.DAG_FILE_PROCESSOR_TIMEOUT = 5
    folder = tmp_path / "dags"
    folder.mkdir()
    write(
        folder / "hang.py",
        """
        import signal, time
        from airflow.sdk import DAG
        signal.signal(signal.SIGALRM, signal.SIG_IGN)
        time.sleep(600)
        """,
    )

    # when the folder is loaded
    results = load(folder)

    # then the file is an import error saying so, and nothing is declared
    assert {r.outcome for r in results.values()} == {FileOutcome.IMPORT_ERROR}
    assert not Dag.objects.exists()
    (error,) = DagImportError.objects.values_list("stacktrace", flat=True)
    assert "timed out after 5s" in error


def wait_for(check: Any, *, timeout: float, process: subprocess.Popen[str], out: Path) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert process.poll() is None, out.read_text()
        assert time.monotonic() < deadline, out.read_text()
        time.sleep(0.5)


@pytest.mark.timeout(600)
@pytest.mark.django_db(transaction=True)
def test_the_dag_processor_picks_up_an_edit(tmp_path):
    # given a DAGs folder with one file, and a running `manage.py dag_processor` on it
    folder = tmp_path / "dags"
    folder.mkdir()
    good = write(folder / "good.py", GOOD.format(tag="v1", retries=0))
    out = tmp_path / "processor.out"
    with out.open("w") as log:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "dag_processor", str(folder), "--interval", "0.5"],
            cwd=REPO,
            env=server_env(DAG_PARSER_HOME=str(tmp_path / "home")),
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
        )
    try:
        wait_for(
            lambda: Dag.objects.filter(dag_id="loader_good", tags=["v1"]).exists(),
            timeout=240,
            process=process,
            out=out,
        )

        # when the file is edited
        write(good, GOOD.format(tag="v2", retries=3))

        # then the processor stores the new version on a later pass
        wait_for(
            lambda: Dag.objects.filter(dag_id="loader_good", tags=["v2"]).exists(),
            timeout=240,
            process=process,
            out=out,
        )
        assert DagTask.objects.get(dag_id="loader_good", task_id="produce").retries == 3
    finally:
        process.send_signal(signal.SIGTERM)
        status = process.wait(timeout=120)
    assert status == 0, out.read_text()
    assert "dag processor stopped after" in out.read_text()


DOC = REPO / "docs" / "dag-files.md"


def test_the_docs_example_loads_as_documented(tmp_path):
    # given the DAG file and the command of docs/dag-files.md
    text = DOC.read_text()
    (source,) = re.findall(r"```python\n(.*?)```", text, re.S)
    commands = re.findall(r"```bash\n(.*?)```", text, re.S)
    assert commands[0].strip() == ".venv/bin/python manage.py declare_dags --dags-folder dags"
    assert (REPO / "examples" / "dags" / "orders.py").read_text() == source  # make run's
    folder = tmp_path / "dags"
    folder.mkdir()
    (folder / "orders.py").write_text(source)

    # when the command runs (as documented, from the folder's parent)
    out = StringIO()
    call_command("declare_dags", "--dags-folder", str(folder), stdout=out)

    # then both DAGs are declared as the page says, the consumer unpaused
    assert f"declared {folder / 'orders.py'}: orders_export, orders_report" in out.getvalue()
    export, report = Dag.objects.order_by("dag_id")
    assert (export.timetable_summary, export.tags, export.is_paused) == (
        "0 0 * * *",
        ["orders"],
        True,
    )
    assert report.asset_expression == {"asset": {"name": "orders", "uri": "s3://warehouse/orders"}}
    assert not report.is_paused
    assert DagTask.objects.get(dag=export, task_id="report").upstream == ["export"]

    # and the page's dag_processor command runs (one pass here): the folder is unchanged
    assert len(commands) == 2
    program, manage, command, dags, *options = commands[1].split()
    assert (program, manage, command, dags) == (
        ".venv/bin/python",
        "manage.py",
        "dag_processor",
        "dags",
    )
    out = StringIO()
    call_command(command, str(folder), *options, "--once", stdout=out)
    assert f"unchanged {folder / 'orders.py'}: orders_export, orders_report" in out.getvalue()


def test_the_folder_is_walked_as_airflow_walks_it(tmp_path):
    # given DAG files, a helper module, ignored files and folders, and a re-included one
    dag = "from airflow.sdk import DAG\n"
    write(tmp_path / "a.py", dag)
    write(tmp_path / "helpers.py", "def helper():\n    return 1\n")  # no "airflow": skipped
    write(tmp_path / "notes.txt", dag)
    (tmp_path / "sub").mkdir()
    write(tmp_path / "sub" / "b.py", dag)
    (tmp_path / "vendor").mkdir()
    write(tmp_path / "vendor" / "c.py", dag)
    write(tmp_path / "skip_me.py", dag)
    write(tmp_path / "skip_keep.py", dag)
    write(tmp_path / ".airflowignore", "vendor/\nskip_*.py  # scratch files\n!skip_keep.py\n")
    write(tmp_path / "sub" / ".airflowignore", "b.py\n")

    # when it is listed, then only what Airflow would parse is there
    assert [p.relative_to(tmp_path).as_posix() for p in dag_files_list(tmp_path)] == [
        "a.py",
        "skip_keep.py",
    ]


def test_a_parser_that_cannot_run_stops_the_command(tmp_path, settings):
    # given no such interpreter
    settings.DAG_PARSER_PYTHON = str(tmp_path / "no-python")
    write(tmp_path / "a.py", "from airflow.sdk import DAG\n")

    # when the folder is loaded, then the command ends with a message naming the setting
    with pytest.raises(CommandError, match="DAG_PARSER_PYTHON"):
        call_command("declare_dags", "--dags-folder", str(tmp_path), stdout=StringIO())
    assert not DagImportError.objects.exists()


@pytest.mark.parametrize(
    "args",
    [pytest.param([], id="neither"), pytest.param(["m.yaml", "--dags-folder", "d"], id="both")],
)
def test_declare_dags_takes_a_manifest_or_a_folder(args):
    with pytest.raises(CommandError, match="either a manifest FILE or --dags-folder DIR"):
        call_command("declare_dags", *args, stdout=StringIO())


def test_a_missing_folder_is_a_clear_error(tmp_path):
    with pytest.raises(CommandError, match="not a folder"):
        call_command("declare_dags", "--dags-folder", str(tmp_path / "nope"), stdout=StringIO())


def test_declare_dags_loads_the_good_files_and_exits_1_naming_each_failed_one(tmp_path):
    # given a good file and two that fail to import
    folder = tmp_path / "dags"
    folder.mkdir()
    write(folder / "good.py", GOOD.format(tag="v1", retries=0))
    write(folder / "broken.py", "from airflow.sdk import DAG\ndef broken(:\n")
    write(folder / "raises.py", "from airflow.sdk import DAG\nraise RuntimeError('no db')\n")

    for _ in range(2):  # the second time, the same (unchanged) errors: still each printed
        # when the folder is loaded
        out, err = StringIO(), StringIO()
        with pytest.raises(CommandError) as raised:
            call_command("declare_dags", "--dags-folder", str(folder), stdout=out, stderr=err)

        # then the command fails naming both files, prints each error, loads the good file
        assert "2 DAG file(s) failed to import" in str(raised.value)
        assert str(folder / "broken.py") in str(raised.value)
        assert str(folder / "raises.py") in str(raised.value)
        assert "SyntaxError" in err.getvalue()
        assert "RuntimeError: no db" in err.getvalue()
        assert Dag.objects.filter(dag_id="loader_good").exists()
