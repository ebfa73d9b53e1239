"""A DAG that branches and short-circuits, for the registry's tests (run by ``manage.py
worker`` through Airflow's own worker entry point). The registry's manifest for it:
tests/runtime/worker/test_worker_branching.py."""

from __future__ import annotations

import pendulum
from airflow.sdk import dag, task


@dag(dag_id="registry_branching", schedule=None, start_date=pendulum.datetime(2026, 1, 1))
def registry_branching():
    @task
    def extract():
        return {"rows": 3}

    @task.branch
    def choose(data):
        return "small" if data["rows"] < 10 else "large"

    @task
    def small():
        return "small path"

    @task
    def large():
        return "large path"

    @task.short_circuit
    def worth_reporting():
        return False  # skips everything downstream

    @task
    def report():
        return "never"

    @task(trigger_rule="none_failed_min_one_success")
    def join(path=None):
        return path

    data = extract()
    chosen = choose(data)
    small_path, large_path = small(), large()
    chosen >> [small_path, large_path]
    joined = join()
    [small_path, large_path] >> joined
    joined >> worth_reporting() >> report()


registry_branching()
