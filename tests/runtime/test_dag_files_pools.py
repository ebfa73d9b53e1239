"""A DAG file's pools, priorities and task limits are read by the loader (``runtime/dag_parse.py``)
and honoured: stored on the DAG's tasks, and its task instances' pool and computed priority
are what Airflow would give them."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path

import pytest

from assets_app.models import DagTask, TaskInstance
from assets_app.services.dags.declare import dags_set_paused
from assets_app.services.runs.dag_runs import dag_run_trigger
from runtime.dag_processing import dag_folder_load

pytestmark = [pytest.mark.django_db, pytest.mark.slow]  # a DAG parser process

if importlib.util.find_spec("airflow.dag_processing") is None:  # pragma: no cover
    pytest.skip("apache-airflow-core is not installed", allow_module_level=True)

DAG_FILE = """
from airflow.sdk import DAG, task

with DAG(dag_id="weighted", schedule=None, max_active_tasks=3):

    @task(pool="warehouse", pool_slots=2, priority_weight=5, max_active_tis_per_dag=1)
    def extract():
        pass

    @task(priority_weight=2, weight_rule="upstream", max_active_tis_per_dagrun=1)
    def load():
        pass

    @task(weight_rule="absolute", priority_weight=7)
    def report():
        pass

    extract() >> load() >> report()
"""


def test_a_dag_files_pools_priorities_and_limits_are_honoured(settings, tmp_path: Path):
    settings.DAG_PARSER_HOME = tmp_path / "parser_home"
    settings.DAG_PARSER_PYTHON = sys.executable
    folder = tmp_path / "dags"
    folder.mkdir()
    (folder / "weighted.py").write_text(textwrap.dedent(DAG_FILE))

    dag_folder_load(folder=folder)

    tasks = {
        t.task_id: (
            t.pool,
            t.pool_slots,
            t.priority_weight,
            t.weight_rule,
            t.max_active_tis_per_dag,
            t.max_active_tis_per_dagrun,
        )
        for t in DagTask.objects.filter(dag_id="weighted")
    }
    assert tasks == {
        "extract": ("warehouse", 2, 5, "downstream", 1, None),
        "load": ("default_pool", 1, 2, "upstream", None, 1),
        "report": ("default_pool", 1, 7, "absolute", None, None),
    }
    dags_set_paused(dag_ids=["weighted"], is_paused=False)
    run = dag_run_trigger(dag_id="weighted")
    priorities = dict(
        TaskInstance.objects.filter(dag_run=run).values_list("task_id", "priority_weight")
    )
    # as Airflow: extract 5 + 2 + 7 downstream, load 2 + 5 upstream, report its own 7
    assert priorities == {"extract": 14, "load": 7, "report": 7}
