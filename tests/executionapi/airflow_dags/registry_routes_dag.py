"""A real Airflow 3 DAG file whose tasks call the execution API routes ordinary task code
reaches: ``ti.xcom_pull`` (XCom ``slice``), a template's ``xcom_pull``,
``TriggerDagRunOperator`` (``POST /dag-runs/{dag_id}/{run_id}``) and the ``get_*`` reads of
other runs and tasks. Run task by task by the real task SDK supervisor against the registry
in ``tests/executionapi/test_real_worker_routes.py``; keep it in step with the manifest that
test declares (same DAG ids and task ids).
"""

from __future__ import annotations

from airflow.providers.standard.operators.python import PythonOperator
from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
from airflow.sdk import DAG, task

TARGET = "registry_routes_target"
TRIGGERED_RUN = "manual__triggered_by_a_task"


def echo(value):
    return value


with DAG(dag_id="registry_routes", schedule=None, catchup=False):

    @task
    def push():
        return {"rows": 3}

    @task
    def pull(ti=None):
        # GET /xcoms/…/slice: the SDK reads every map index of the task
        return {
            "one": ti.xcom_pull(task_ids="push"),
            "many": ti.xcom_pull(task_ids=["push"]),
            "missing": ti.xcom_pull(task_ids="never_pushed"),
        }

    templated = PythonOperator(
        task_id="templated",
        python_callable=echo,
        op_kwargs={"value": "{{ ti.xcom_pull(task_ids='push')['rows'] }} rows"},
    )

    trigger = TriggerDagRunOperator(
        task_id="trigger",
        trigger_dag_id=TARGET,
        trigger_run_id=TRIGGERED_RUN,
        conf={"from": "registry_routes"},
    )

    @task
    def ask(ti=None, dag_run=None):
        crumbs = ti.get_task_breadcrumbs(dag_id="registry_routes", run_id=dag_run.run_id)
        previous_run = ti.get_previous_dagrun(state="success")
        previous_ti = ti.get_previous_ti(state="success")
        dag = ti.get_dag(TARGET)
        return {
            "dr_count": ti.get_dr_count(dag_id=TARGET),
            "dagrun_state": ti.get_dagrun_state(dag_id=TARGET, run_id=TRIGGERED_RUN),
            "ti_count": ti.get_ti_count(
                dag_id="registry_routes", run_ids=[dag_run.run_id], states=["success"]
            ),
            "task_states": ti.get_task_states(dag_id="registry_routes", run_ids=[dag_run.run_id]),
            "previous_run": previous_run.run_id if previous_run else None,
            "previous_ti": previous_ti.run_id if previous_ti else None,
            "dag": {"dag_id": dag.dag_id, "tags": dag.tags, "is_paused": dag.is_paused},
            "breadcrumbs": [crumb["task_id"] for crumb in crumbs],
        }

    push() >> pull() >> templated >> trigger >> ask()
