"""A run's ``conf`` reaches the tasks of a real Airflow DAG file under a real ``manage.py
worker``, as under Airflow: ``dag_run.conf`` in the task context, ``params`` overridden by the
conf (``[core] dag_run_conf_overrides_params``), ``{{ dag_run.conf[...] }}`` and
``{{ params.x }}`` rendered; a ``TriggerDagRunOperator(conf=…, wait_for_completion=True)``
hands its conf over and waits for the run it triggered; Airflow's own
``example_trigger_target_dag.py`` (and the standard provider's controller) end as under Airflow
with a conf. Skipped without Airflow's task SDK and core."""

from __future__ import annotations

import importlib.util
import shutil
import textwrap
from pathlib import Path

import pytest

from assets_app.models import Dag, DagRun, TaskInstance, XCom
from assets_app.services.dags.declare import dags_set_paused
from assets_app.services.runs.dag_runs import dag_run_trigger
from tests.executionapi.conftest import airflow_sdk  # noqa: F401 (a fixture)
from tests.runtime.worker.conftest import dags_folder_load, wait_until

pytestmark = pytest.mark.slow

if importlib.util.find_spec("airflow.example_dags") is None:  # pragma: no cover
    pytest.skip("apache-airflow-core is not installed", allow_module_level=True)

import airflow.example_dags  # noqa: E402 - only after the skip
import airflow.providers.standard.example_dags  # noqa: E402

TARGET = Path(airflow.example_dags.__path__[0]) / "example_trigger_target_dag.py"
CONTROLLER = (
    Path(airflow.providers.standard.example_dags.__path__[0]) / "example_trigger_controller_dag.py"
)

CONF_DAGS = """
from datetime import datetime

from airflow.providers.standard.operators.bash import BashOperator
from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
from airflow.sdk import DAG, Param, task

with DAG(
    dag_id="conf_target",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    params={
        "region": Param("eu", type="string", enum=["eu", "us"]),
        "limit": Param(10, type="integer", minimum=1),
        "note": "kept",
    },
):

    @task
    def seen(dag_run=None, params=None):
        return {"conf": dag_run.conf, "params": dict(params)}

    seen()
    BashOperator(
        task_id="templated",
        bash_command=(
            'echo "{{ dag_run.conf[\\'region\\'] }}/{{ params.region }}/{{ params.limit }}"'
        ),
    )

with DAG(dag_id="conf_controller", schedule=None, start_date=datetime(2026, 1, 1)):
    TriggerDagRunOperator(
        task_id="trigger",
        trigger_dag_id="conf_target",
        trigger_run_id="from_controller",
        conf={"region": "us", "limit": 3},
        wait_for_completion=True,
        poke_interval=1,
    )
"""


def _xcom(dag_id: str, run_id: str, task_id: str) -> object:
    return XCom.objects.get(dag_id=dag_id, run_id=run_id, task_id=task_id, key="return_value").value


def _finished(run_ids: list[tuple[str, str]]) -> bool:
    states = {
        (r.dag_id, r.run_id): r.state
        for r in DagRun.objects.filter(dag_id__in={d for d, _ in run_ids})
    }
    return all(states.get(key) in ("success", "failed") for key in run_ids)


def test_conf_params_and_jinja_reach_airflow_tasks_and_trigger_dag_run_hands_conf_over(
    airflow_sdk,  # noqa: F811
    start_worker,
    settings,
    tmp_path,
):
    # given a DAGs folder with a DAG of params and its controller, and Airflow's own
    # trigger target and controller examples, loaded and unpaused
    folder = tmp_path / "dags"
    folder.mkdir()
    (folder / "conf_dags.py").write_text(textwrap.dedent(CONF_DAGS))
    shutil.copy(TARGET, folder / TARGET.name)
    shutil.copy(CONTROLLER, folder / CONTROLLER.name)
    out = dags_folder_load(folder, settings=settings, parser_home=tmp_path / "parser_home")
    assert Dag.objects.get(dag_id="conf_target").params[0] == [
        "region",
        {"default": "eu", "description": None, "schema": {"type": "string", "enum": ["eu", "us"]}},
    ], out
    dags_set_paused(dag_ids=list(Dag.objects.values_list("dag_id", flat=True)), is_paused=False)

    # when runs are triggered: the target with a conf, without one, the controllers (whose
    # TriggerDagRunOperator triggers the targets with their conf), Airflow's target with a conf
    worker = start_worker(
        "--concurrency",
        "3",  # a waiting controller holds one slot while its target runs
        env={
            "AIRFLOW_HOME": str(tmp_path / "airflow_home"),
            "AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": "1",
        },
    )
    dag_run_trigger(dag_id="conf_target", run_id="with_conf", conf={"region": "us"})
    dag_run_trigger(dag_id="conf_target", run_id="without_conf")
    dag_run_trigger(dag_id="conf_controller", run_id="controller")
    dag_run_trigger(
        dag_id="example_trigger_target_dag", run_id="direct", conf={"message": "direct hello"}
    )
    dag_run_trigger(dag_id="example_trigger_controller_dag", run_id="example_controller")
    expected_runs = [
        ("conf_target", "with_conf"),
        ("conf_target", "without_conf"),
        ("conf_controller", "controller"),
        ("conf_target", "from_controller"),
        ("example_trigger_target_dag", "direct"),
        ("example_trigger_controller_dag", "example_controller"),
    ]
    try:
        wait_until(
            lambda: (
                _finished(expected_runs)
                and DagRun.objects.filter(dag_id="example_trigger_target_dag").count() == 2
                and _finished(
                    list(
                        DagRun.objects.filter(dag_id="example_trigger_target_dag").values_list(
                            "dag_id", "run_id"
                        )
                    )
                )
            ),
            timeout=600,
            what=f"the runs\n{worker.output()[-20000:]}",
        )
    finally:
        worker.process.terminate()
        worker.wait(timeout=60)

    # then every task succeeded but one, as under Airflow: without a conf,
    # {{ dag_run.conf['region'] }} is undefined, which Airflow's StrictUndefined refuses
    states = {(ti.dag_id, ti.run_id, ti.task_id): ti.state for ti in TaskInstance.objects.all()}
    failed = {key for key, state in states.items() if state != "success"}
    assert failed == {("conf_target", "without_conf", "templated")}, (
        states,
        worker.output()[-20000:],
    )
    assert states[("conf_target", "without_conf", "templated")] == "failed"
    (log,) = (tmp_path / "task_logs" / "conf_target").glob("without_conf/templated/attempt=1.log")
    assert "'dict object' has no attribute 'region'" in log.read_text()
    runs = dict(DagRun.objects.values_list("run_id", "state"))
    assert runs.pop("without_conf") == "failed"
    assert set(runs.values()) == {"success"}

    # the conf reached the tasks and overrode the params (defaults for what it leaves out)
    assert _xcom("conf_target", "with_conf", "seen") == {
        "conf": {"region": "us"},
        "params": {"region": "us", "limit": 10, "note": "kept"},
    }
    assert _xcom("conf_target", "without_conf", "seen") == {
        "conf": {},
        "params": {"region": "eu", "limit": 10, "note": "kept"},
    }
    # the TriggerDagRunOperator handed its conf over and waited for the run to succeed
    assert _xcom("conf_target", "from_controller", "seen") == {
        "conf": {"region": "us", "limit": 3},
        "params": {"region": "us", "limit": 3, "note": "kept"},
    }
    assert DagRun.objects.get(dag_id="conf_target", run_id="from_controller").conf == {
        "region": "us",
        "limit": 3,
    }
    controller = TaskInstance.objects.get(dag_id="conf_controller", task_id="trigger")
    target_end = DagRun.objects.get(dag_id="conf_target", run_id="from_controller").end_date
    assert controller.end_date >= target_end  # it waited for the completion
    # Jinja rendered dag_run.conf and params (BashOperator's last line is its XCom)
    assert _xcom("conf_target", "with_conf", "templated") == "us/us/10"
    assert _xcom("conf_target", "from_controller", "templated") == "us/us/3"

    # Airflow's example target printed the message it was given, directly and by its
    # controller (conf={"message": "Hello World"})
    logs = tmp_path / "task_logs" / "example_trigger_target_dag"
    texts = {
        path.parent.parent.name: path.read_text() for path in logs.glob("*/run_this/attempt=1.log")
    }
    assert len(texts) == 2, list(logs.rglob("*"))
    joined = "\n".join(texts.values())
    assert "Remotely received value of direct hello for key=message" in joined
    assert "Remotely received value of Hello World for key=message" in joined
    bash_logs = "\n".join(p.read_text() for p in logs.glob("*/bash_task/attempt=1.log"))
    assert "Here is the message: direct hello" in bash_logs
    assert "Here is the message: Hello World" in bash_logs
