"""Every ``GET`` route ``/api/v2`` serves answers, on a registry that looks like real use, a body
that its own ``openapi.json`` allows (JSON Schema) and that Airflow's client's model of that
response reads (issue 40 item 1): a month of history (devtools.showcase: assets, aliases,
events, asset-triggered and scheduled runs, a queue), a tagged cron DAG with params, a pool and
a limit (a manifest), a run triggered with a conf and carrying a note, XComs, a try's log, a
JSON variable holding a secret, a connection with a password, an import error, and the DAG
file's code. A route the document adds and this test does not reach fails the test."""

from __future__ import annotations

import json
import re
from io import StringIO
from typing import Any

import airflow_client.client.models as client_models
import pytest
from django.core.management import call_command
from jsonschema import Draft202012Validator

from assets_app.models import (
    AssetDagRunQueue,
    DagImportError,
    DagRunNote,
    DagRunTriggeredBy,
    EventLog,
    TaskInstance,
    Trigger,
    XCom,
)
from assets_app.services.audit import Actor
from assets_app.services.dags.code import dag_code_store
from assets_app.services.runs.advance import task_instances_advance
from assets_app.services.runs.dag_runs import dag_run_trigger
from assets_app.services.runs.logs import task_log_append
from assets_app.services.runs.pools import PoolSpec, pool_set
from assets_app.services.runs.triggers import triggerer_register
from assets_app.services.secrets.connections import ConnectionFields, connection_create
from assets_app.services.secrets.variables import variable_set
from devtools.showcase import showcase_seed
from publicapi.schema import openapi_document

pytestmark = pytest.mark.django_db

DAG_ID = "finance_emea_orders_daily_export_and_reconciliation"
MANIFEST = f"""
dags:
  - dag_id: {DAG_ID}
    schedule: "0 2 * * *"
    tags: [finance, daily, emea]
    max_active_runs: 3
    params:
      region: emea
      day: "2026-12-01"
    tasks:
      - task_id: extract_orders
        callable: tasks.py:extract
        pool: warehouse
        retries: 2
      - task_id: load_orders
        callable: tasks.py:load
        upstream: [extract_orders]
        outlets:
          - asset: {{uri: "s3://warehouse/orders/daily", name: orders_daily}}
      - task_id: reconcile_partition
        mapped: {{length: 3, group: null}}
"""
CODE = "from airflow.sdk import DAG\n\nwith DAG('finance_emea_orders_daily_export'):\n    ...\n"


#: the person the fixture's writes are recorded for
OPS = Actor(name="ops", via="rest_api", display_name="Ops")


@pytest.fixture
def registry(tmp_path) -> dict[str, Any]:
    """The path parameters of every route, each naming a row of real-looking data."""
    site = showcase_seed()
    pool_set(PoolSpec(name="warehouse", slots=4, description="the warehouse's connections"))
    manifest = tmp_path / "dags.yaml"
    manifest.write_text(MANIFEST)
    (tmp_path / "tasks.py").write_text("def extract():\n    pass\n\ndef load():\n    pass\n")
    call_command("declare_dags", str(manifest), stdout=StringIO())
    dag_code_store(fileloc=str(manifest), source=CODE)
    run = dag_run_trigger(
        dag_id=DAG_ID,
        run_id="manual__2026-12-04T09:15:00+00:00_reconcile",
        conf={"region": "emea", "day": "2026-12-03"},
        triggered_by=DagRunTriggeredBy.REST_API,
        triggering_user_name="ops",
        actor=OPS,
    )
    DagRunNote.objects.create(dag_run=run, content="re-run after the late ledger", user_id="1")
    task_instances_advance(dag_run_ids=[run.pk])  # reconcile_partition's 3 map indexes
    TaskInstance.objects.filter(task_id="reconcile_partition", map_index=1).update(
        rendered_map_index="partition=2026-12-03/emea"
    )
    ti = TaskInstance.objects.get(dag_run=run, task_id="extract_orders")
    XCom.objects.create(
        dag_run=run,
        dag_id=DAG_ID,
        run_id=run.run_id,
        task_id=ti.task_id,
        key="return_value",
        value={"rows": 1204, "files": ["orders_2026-12-03.parquet"]},
    )
    # a deferred task instance, its trigger run by a triggerer (trigger, triggerer_job)
    waiting = TaskInstance.objects.get(dag_run=run, task_id="load_orders")
    triggerer = triggerer_register(hostname="triggerer-1", pid=7, capacity=1000)
    trigger = Trigger.objects.create(
        classpath="airflow.providers.standard.triggers.temporal.DateTimeTrigger",
        kwargs='{"moment": "2026-12-04T10:00:00+00:00"}',
        triggerer=triggerer,
    )
    TaskInstance.objects.filter(pk=waiting.pk).update(
        state="deferred", trigger=trigger, next_method="execute_complete"
    )
    task_log_append(
        task_instance_id=ti.pk,
        offset=0,
        content='{"event": "extracting 1204 rows", "level": "info"}\n',
    )
    variable_set(
        key="warehouse_settings",
        value='{"schema": "analytics", "api_token": "s3cr3t"}',
        actor=OPS,
    )
    connection_create(
        conn_id="warehouse_db",
        values=ConnectionFields(
            conn_type="postgres", host="db.internal", login="etl", password="hunter2"
        ),
        actor=OPS,
    )
    error = DagImportError.objects.create(
        filename="/srv/dags/finance/broken_ledger.py",
        stacktrace='Traceback (most recent call last):\n  File "broken_ledger.py", line 3\n',
    )
    queued = AssetDagRunQueue.objects.filter(target_dag_id=site.waiting_dag_id).first()
    assert queued is not None
    return {
        "asset_id": site.asset.pk,
        "asset_alias_id": site.alias.pk,
        "connection_id": "warehouse_db",
        "dag_id": DAG_ID,
        "dag_run_id": run.run_id,
        "task_id": ti.task_id,
        "mapped_task_id": "reconcile_partition",
        "map_index": 1,
        "try_number": 1,
        "xcom_key": "return_value",
        "import_error_id": error.pk,
        "pool_name": "warehouse",
        "variable_key": "warehouse_settings",
        "event_log_id": EventLog.objects.get(event="trigger_dag_run").pk,
        # the one route about a (DAG, asset) queue row
        "queued": {"dag_id": queued.target_dag_id, "asset_id": queued.asset_id},
    }


DOCUMENT = openapi_document()
GET_ROUTES = sorted(path for path, ops in DOCUMENT["paths"].items() if "get" in ops)


def json_schema(path: str) -> dict[str, Any]:
    content = DOCUMENT["paths"][path]["get"]["responses"]["200"]["content"]
    return dict(content["application/json"]["schema"])


def client_model(schema: dict[str, Any]) -> Any:
    """Airflow's client's class for the response, by its schema's name (the client is
    generated from the same document); None for an unnamed schema (anyOf, or ``{}``)."""
    ref = schema.get("$ref")
    return getattr(client_models, ref.rsplit("/", 1)[1]) if ref else None


def schema_errors(schema: dict[str, Any], body: Any) -> list[tuple[list[Any], str]]:
    validator = Draft202012Validator({**schema, "components": DOCUMENT["components"]})
    found = sorted(validator.iter_errors(body), key=lambda e: list(e.path))
    return [(list(e.path), e.message[:200]) for e in found]


@pytest.mark.parametrize("path", GET_ROUTES)
def test_every_get_route_answers_what_the_schema_and_airflows_client_read(
    path, registry, admin_api
):
    params = {**registry, **(registry["queued"] if "{asset_id}/queuedEvents" in path else {})}
    if path.startswith("/api/v2/dags/{dag_id}/assets/") and "{asset_id}" not in path:
        params["dag_id"] = registry["queued"]["dag_id"]  # a DAG with queued events
    if path.endswith(("/listMapped", "/{map_index}")):
        params["task_id"] = registry["mapped_task_id"]
    url = re.sub(r"\{(\w+)\}", lambda m: str(params[m.group(1)]), path)

    response = admin_api.client.get(url, HTTP_ACCEPT="application/json", **admin_api.headers)

    assert response.status_code == 200, url
    raw = b"".join(response.streaming_content) if response.streaming else response.content
    body = json.loads(raw)
    schema = json_schema(path)
    errors = schema_errors(schema, body)
    assert not errors, (url, errors[:5])
    model = client_model(schema)
    if model is not None:
        parsed = model.from_dict(body)
        assert parsed is not None, url
    assert "s3cr3t" not in json.dumps(body)
    assert "hunter2" not in json.dumps(body)


def test_the_fixture_fills_the_lists(registry, admin_api):
    """The lists the test reads are not empty: each schema is checked on real rows."""
    for path, key in [
        ("assets", "assets"),
        ("assets/aliases", "asset_aliases"),
        ("assets/events", "asset_events"),
        ("dags", "dags"),
        ("dags/~/dagRuns", "dag_runs"),
        (f"dags/{DAG_ID}/dagRuns/{registry['dag_run_id']}/taskInstances", "task_instances"),
        ("importErrors", "import_errors"),
        ("pools", "pools"),
        ("variables", "variables"),
        ("connections", "connections"),
        ("eventLogs", "event_logs"),
        ("dagTags", "tags"),
        ("dagStats", "dags"),
    ]:
        body = admin_api.get(path).json()
        assert body[key], path


def test_a_dag_as_the_registry_once_sent_it_fails_both_checks(registry, admin_api):
    """The check can fail: tags without ``dag_display_name`` (what ``/api/v2`` sent before
    issue 40, which broke Airflow's client on every tagged DAG) are refused by both."""
    body = admin_api.get(f"dags/{DAG_ID}").json()
    body["tags"] = [{"name": tag["name"], "dag_id": DAG_ID} for tag in body["tags"]]
    schema = json_schema("/api/v2/dags/{dag_id}")

    assert [path for path, _ in schema_errors(schema, body)] == [
        ["tags", 0],
        ["tags", 1],
        ["tags", 2],
    ]
    with pytest.raises(ValueError, match="dag_display_name"):
        client_model(schema).from_dict(body)


def test_a_deferred_task_instance_shows_its_trigger_and_triggerer(registry, admin_api):
    url = f"dags/{DAG_ID}/dagRuns/{registry['dag_run_id']}/taskInstances/load_orders"
    body = admin_api.get(url).json()

    assert body["state"] == "deferred"
    assert body["trigger"]["classpath"].endswith("DateTimeTrigger")
    assert body["trigger"]["kwargs"] == ""  # emptied, as Airflow does
    assert body["triggerer_job"]["job_type"] == "TriggererJob"
    assert body["triggerer_job"]["hostname"] == "triggerer-1"
    assert body["triggerer_job"]["state"] == "running"
