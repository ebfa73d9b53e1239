"""A real Airflow 3 DAG file whose task reads and writes variables and reads a connection
through the SDK (``Variable.get``/``set``, ``BaseHook.get_connection``, ``Connection.get``),
run by ``manage.py worker`` in ``tests/runtime/worker/test_worker_secrets.py``."""

from __future__ import annotations

import logging

from airflow.sdk import DAG, BaseHook, Connection, Variable, task

log = logging.getLogger(__name__)

with DAG(dag_id="registry_secrets", schedule=None, catchup=False):

    @task
    def use_secrets():
        greeting = Variable.get("greeting")
        config = Variable.get("config", deserialize_json=True)
        missing = Variable.get("not_there", default="fallback")
        Variable.set("written_by_task", f"{greeting} from the task")
        hook_conn = BaseHook.get_connection("warehouse")
        sdk_conn = Connection.get("warehouse")
        log.info("read variable greeting=%s config=%s missing=%s", greeting, config, missing)
        log.info(
            "read connection %s type=%s host=%s login=%s port=%s extra=%s",
            hook_conn.conn_id,
            hook_conn.conn_type,
            hook_conn.host,
            hook_conn.login,
            hook_conn.port,
            hook_conn.extra_dejson,
        )
        log.info("the connection's password is %s", hook_conn.password)
        same = hook_conn.password == sdk_conn.password and sdk_conn.host == hook_conn.host
        log.info("BaseHook and Connection.get agree: %s", same)
        return {"password_length": len(hook_conn.password or ""), "agree": same}

    use_secrets()
