"""Record what Airflow itself gives for its own example DAG files: each DAG's final task states.

Run ``python tests/runtime/worker/airflow_reference/record.py [FILE.py ...]`` with the ``airflow``
extra installed (``apache-airflow-core``). For each example file (default: ``EXAMPLES``), in a
scratch ``AIRFLOW_HOME`` with a scratch SQLite metadata database and a DAGs folder holding only
that file, it:

1. serializes the file's DAGs (``airflow dags reserialize``);
2. runs ``airflow dags test DAG_ID`` for every DAG that is not asset-scheduled (its schedule
   names no asset; time-scheduled and unscheduled DAGs alike), and fires the asset watchers
   ``FIRED_WATCHERS`` names once (Airflow's ``Trigger.submit_event``);
3. asks Airflow's own scheduler rule (``DagModel.dags_needing_dagruns``) which asset-scheduled
   DAGs the queued asset events (``asset_dag_run_queue``) make due, deletes their queue rows
   (as the scheduler does when it creates their runs) and runs ``airflow dags test`` for each;
   repeated until no DAG is due, so consumers of consumers run too (``dags test`` of a
   producer does not run its consumers itself);
4. reads every task instance's final state from the scratch database.

It writes ``states.json`` next to this file: ``{"airflow_version", "files": {file: {dag_id:
{"trigger": "manual" | "asset", "tasks": {task_id: state}}}}}``. A DAG that never becomes due
(an asset-scheduled DAG whose assets no DAG in the file updates) is absent.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
STATES = HERE / "states.json"
TIMEOUT = 900  # seconds for one file's Airflow process

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
    "example_setup_teardown_taskflow.py",
    "example_failed_dag.py",
    "example_trigger_target_dag.py",
    "example_dynamic_task_mapping.py",
    "example_dynamic_task_mapping_with_no_taskflow_operators.py",
    "example_task_state_store_mapped.py",
    "example_params_trigger_ui.py",
    "example_time_delta_sensor_async.py",
    "example_asset_with_watchers.py",
)

#: Asset watchers (AIP-82) whose trigger fires once in the recording, by file, with the
#: payload it sends: ``dags test`` runs no triggerer, so the event of the watched file deleted
#: once (``FileDeleteTrigger``: ``True``; ``DirectoryFileDeleteTrigger``: the file's path) is
#: submitted through Airflow's own ``Trigger.submit_event``, which registers the asset event
#: as Airflow's triggerer does. ``example_asset_with_watchers``'s schedule is the list of its
#: three assets (all of them): it runs once each of the three files was deleted.
FIRED_WATCHERS: dict[str, dict[str, Any]] = {
    "example_asset_with_watchers.py": {
        "test_asset_watcher": True,
        "us_flag_watcher": {"filepath": "/tmp/region-flags/us.flag"},  # noqa: S108 (Airflow's)
        "eu_flag_watcher": {"filepath": "/tmp/region-flags/eu.flag"},  # noqa: S108
    },
}

# Run inside the scratch Airflow environment, in one process per file (Airflow's import is the
# slow part): ``airflow dags reserialize``, then ``airflow dags test`` through Airflow's own CLI
# parser for each DAG that is not asset-scheduled, then, round after round, ``airflow dags test``
# for each asset-scheduled DAG that Airflow's scheduler rule finds due. Prints
# ``{dag_id: "manual" | "asset"}``: the DAGs it ran and why.
INSIDE = """
import json, sys
from sqlalchemy import delete, select
from airflow.cli.cli_parser import get_parser
from airflow.models.asset import AssetDagRunQueue
from airflow.models.dag import DagModel
from airflow.utils.session import create_session

def airflow(*argv):
    args = get_parser().parse_args(list(argv))
    try:
        args.func(args)
    except SystemExit as exit:  # `dags test` of a run that failed
        print(f"airflow {' '.join(argv)}: {exit}", file=sys.stderr)

airflow("dags", "reserialize")
fired = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
if fired:  # as Airflow's triggerer does when the watcher's trigger fires
    from airflow.models.asset import AssetWatcherModel
    from airflow.models.trigger import Trigger
    from airflow.triggers.base import TriggerEvent

    with create_session() as session:
        watched = dict(session.execute(
            select(AssetWatcherModel.name, AssetWatcherModel.trigger_id).where(
                AssetWatcherModel.name.in_(list(fired))
            )
        ).all())
    if set(watched) != set(fired):
        raise SystemExit(f"watchers {sorted(fired)}: found {watched}")
    for name, trigger_id in sorted(watched.items()):
        Trigger.submit_event(trigger_id, TriggerEvent(fired[name]))
with create_session() as session:
    dags = session.execute(select(DagModel.dag_id, DagModel.asset_expression)).all()
trigger = {}
for dag_id, asset_expression in sorted(dags):
    if asset_expression is None:
        trigger[dag_id] = "manual"
        airflow("dags", "test", dag_id)
for _ in range(10):  # consumers, then consumers of consumers
    with create_session() as session:
        _, due = DagModel.dags_needing_dagruns(session)
        due = sorted(set(due) - set(trigger))
        # the scheduler deletes a DAG's queue rows when it creates the DAG's run
        session.execute(delete(AssetDagRunQueue).where(AssetDagRunQueue.target_dag_id.in_(due)))
    if not due:
        break
    for dag_id in due:
        trigger[dag_id] = "asset"
        airflow("dags", "test", dag_id)
print("TRIGGERED " + json.dumps(trigger))
"""


def example_dags_dir() -> Path:
    """The installed ``airflow/example_dags`` folder (without importing Airflow here: its
    configuration must come from the scratch environment)."""
    out = subprocess.run(
        [sys.executable, "-c", "import airflow.example_dags as e; print(e.__path__[0])"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "AIRFLOW_HOME": tempfile.mkdtemp(prefix="af_probe_")},
    )
    return Path(out.stdout.strip())


def airflow_version() -> str:
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "from importlib.metadata import version as v; print(v('apache-airflow-core'))",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


class Scratch:
    """A scratch Airflow installation: its home, its SQLite database, its DAGs folder."""

    def __init__(self, root: Path, template_db: Path | None = None) -> None:
        self.root = root
        self.home = root / "airflow_home"
        self.dags = root / "dags"
        self.db = root / "airflow.db"
        self.home.mkdir(parents=True, exist_ok=True)
        self.dags.mkdir(exist_ok=True)
        if template_db is not None:
            shutil.copy(template_db, self.db)

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
        env.update(
            AIRFLOW_HOME=str(self.home),
            AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{self.db}",
            AIRFLOW__CORE__DAGS_FOLDER=str(self.dags),
            AIRFLOW__CORE__LOAD_EXAMPLES="False",
            AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION="False",
            AIRFLOW__CORE__UNIT_TEST_MODE="False",
            AIRFLOW__LOGGING__BASE_LOG_FOLDER=str(self.root / "logs"),
        )
        return env

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            args, env=self.env(), capture_output=True, text=True, timeout=TIMEOUT, check=False
        )

    def airflow(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = self.run(sys.executable, "-m", "airflow", *args)
        if check and done.returncode != 0:
            raise RuntimeError(
                f"airflow {' '.join(args)} exited {done.returncode}\n{done.stdout}\n{done.stderr}"
            )
        return done

    def query(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        with sqlite3.connect(self.db) as db:
            return db.execute(sql, params).fetchall()


def ti_key(task_id: str, map_index: int) -> str:
    """A task instance's key in ``states.json``: its task id, with ``[map_index]`` when it is
    one map index of a mapped task."""
    return task_id if map_index < 0 else f"{task_id}[{map_index}]"


def record_file(example: Path, template_db: Path, work: Path) -> dict[str, Any]:
    scratch = Scratch(work / example.stem, template_db)
    shutil.copy(example, scratch.dags / example.name)
    fired = json.dumps(FIRED_WATCHERS.get(example.name, {}))
    done = scratch.run(sys.executable, "-c", INSIDE, fired)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("TRIGGERED ")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"{example.name}: exited {done.returncode}\n{done.stderr[-5000:]}")
    trigger: dict[str, str] = json.loads(lines[-1].removeprefix("TRIGGERED "))
    if not trigger:
        errors = scratch.query("SELECT stacktrace FROM import_error")
        raise RuntimeError(f"{example.name}: no DAG ran: {errors}")
    result: dict[str, Any] = {}
    for dag_id in sorted(trigger):
        rows = scratch.query(
            "SELECT task_id, map_index, state FROM task_instance WHERE dag_id = ? "
            "ORDER BY task_id, map_index",
            dag_id,
        )
        if not rows:
            raise RuntimeError(f"{example.name}: {dag_id} ran no task under Airflow")
        tasks = {ti_key(task_id, map_index): state for task_id, map_index, state in rows}
        result[dag_id] = {"trigger": trigger[dag_id], "tasks": tasks}
    return result


def record(names: list[str], work: Path) -> dict[str, Any]:
    examples = example_dags_dir()
    template = Scratch(work / "_template")
    template.airflow("db", "migrate")
    files: dict[str, Any] = {}
    for name in names:
        print(f"recording {name} ...", file=sys.stderr, flush=True)
        files[name] = record_file(examples / name, template.db, work)
    return {"airflow_version": airflow_version(), "files": files}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", help="example file names (default: all of EXAMPLES)")
    parser.add_argument("--out", type=Path, default=STATES, help="JSON file to write")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="airflow_reference_"))
    try:
        recorded = record(args.files or list(EXAMPLES), work)
    finally:
        if args.keep:
            print(f"scratch kept in {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)
    if args.files and args.out.exists():  # re-recording some files keeps the others
        previous = json.loads(args.out.read_text())
        previous["files"].update(recorded["files"])
        previous["airflow_version"] = recorded["airflow_version"]
        recorded = previous
    args.out.write_text(json.dumps(recorded, indent=2, sort_keys=True) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
