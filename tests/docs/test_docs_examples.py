"""The shell examples of the docs, run as written against a live server on the test database.

Each test runs one ``<!-- example: NAME -->`` block with ``bash -euo pipefail`` from a scratch
copy of the repository's layout (``tests/docs/examples.py``), in the state the page says it
starts from (``make run`` done: the example DAGs declared, the admin user made), and checks
that what the page shows is what the commands print.
"""

from __future__ import annotations

import io
import json

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

from assets_app.models import (
    Asset,
    AssetActive,
    AssetAliasAsset,
    AssetDagRunQueue,
    AssetEvent,
    Connection,
    Dag,
    DagRun,
    DagTask,
    Pool,
    TaskInstance,
    Variable,
)
from assets_app.services.runs.dag_runs import task_instance_create
from tests.docs.examples import assert_shows, doc_example, run_shell_example
from tests.executionapi.conftest import client_for, state_url
from tests.live_server import REPO

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True, reset_sequences=True)]


def _make_run_done() -> None:
    """What ``make run`` leaves behind before it serves: the examples declared, an admin."""
    call_command("declare_dags", str(REPO / "examples" / "dags.yaml"), stdout=io.StringIO())
    User.objects.create_superuser("admin", password="not-shown")


def test_the_five_minute_tour(server, tmp_path):
    # given
    _make_run_done()

    # when
    result = run_shell_example("tour", tmp_path, server_url=server.url)

    # then it ran, showed what the page shows, and the consumer's run succeeded
    assert result.returncode == 0, result.stdout + result.stderr
    assert_shows(doc_example("tour"), result.stdout)
    [run] = DagRun.objects.filter(dag_id="asset_s3_bucket_consumer")
    assert run.state == "success"
    assert TaskInstance.objects.get(dag_run=run).state == "success"
    assert AssetEvent.objects.get().extra == {"rows": 42}


def test_the_commands_examples(tmp_path):
    # given the examples declared as the manifest page does it
    declared = run_shell_example("declare-examples", tmp_path / "declare")
    assert declared.returncode == 0, declared.stdout + declared.stderr
    assert "Declared 4 DAG(s)" in declared.stdout

    # when
    result = run_shell_example("commands", tmp_path / "commands")

    # then
    assert result.returncode == 0, result.stdout + result.stderr
    assert TaskInstance.objects.filter(dag_id="asset_s3_bucket_producer").count() == 1
    assert '"token": "' in result.stdout
    assert "Would delete 0 asset event(s)" in result.stdout


def test_the_pools_examples(tmp_path):
    result = run_shell_example("pools", tmp_path)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "Pool reports set: 4 slots" in result.stdout
    assert "pool(s) exported" in result.stdout
    assert "Pool reports deleted" in result.stdout
    assert set(Pool.objects.values_list("pool", flat=True)) == {"default_pool", "deferring"}


def test_the_operator_api_examples(server, tmp_path):
    # given the page's server is this test's
    _make_run_done()
    example = doc_example("operator-api")
    assert "http://127.0.0.1:8000/api/v1" in example

    # when
    result = run_shell_example(
        "operator-api",
        tmp_path,
        server_url=server.url,
        replace={"http://127.0.0.1:8000": server.url},
    )

    # then every call answered what the page shows
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert '"extra":{"rows":42}' in out
    assert '"dag_id":"asset_s3_bucket_consumer"' in out
    assert '"is_paused":true' in out
    assert '"after":["Enter a valid date/time."]' in out
    assert '{"detail":"no asset with name \'nope\'","code":"not_found"}' in out
    assert '"code":"permission_denied"' in out
    assert "Generated token" in out or "for user admin" in out


def test_the_manifest_example_declares_what_the_page_says(tmp_path):
    # given the page's manifest as a file
    manifest = tmp_path / "dags.yaml"
    manifest.write_text(doc_example("manifest"))
    out = io.StringIO()

    # when
    call_command("declare_dags", str(manifest), stdout=out, stderr=io.StringIO())

    # then
    assert "Declared 2 DAG(s)" in out.getvalue()
    consumer = DagTask.objects.get(dag_id="asset_s3_bucket_consumer")
    assert (consumer.retries, consumer.retry_delay) == (2, 60)
    assert consumer.callable == f"{tmp_path / 'tasks' / 'consumer.py'}:consume"  # the folder's
    assert Dag.objects.get(dag_id="asset_s3_bucket_producer").is_paused is False
    assert Asset.objects.get().uri == "s3://bucket/my-task"


def test_the_variables_and_connections_examples(tmp_path):
    # when
    result = run_shell_example("secrets", tmp_path)

    # then every command succeeded, printed what the page shows, and no secret was printed
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert '{\n  "rows": 3\n}' in out
    assert "\nconfig\ngreeting\n" in out  # the keys only, in order
    assert '"password": "***"' in out
    assert '\\"api_token\\": \\"***\\"' in out or '"api_token": "***"' in out
    assert "s3cr3t" not in out + result.stderr
    assert list(Variable.objects.values_list("key", flat=True)) == ["config"]
    warehouse = Connection.objects.get()
    assert (warehouse.conn_id, warehouse.is_encrypted) == ("warehouse", True)


def test_the_success_body_records_what_the_page_says():
    # given the example DAGs, and a running task instance of the alias producer
    _make_run_done()
    ti = task_instance_create(
        dag_id="asset_alias_example_alias_producer",
        task_id="produce_asset_events_through_asset_alias",
        run_id="manual__docs",
    ).task_instance
    client = client_for(ti)
    started = client.patch(
        f"/execution/task-instances/{ti.pk}/run",
        {
            "state": "running",
            "hostname": "worker-1",
            "unixname": "airflow",
            "pid": 4242,
            "start_date": "2026-12-01T19:25:20Z",
        },
        format="json",
    )
    assert started.status_code == 200, started.content

    # when
    response = client.patch(state_url(ti), json.loads(doc_example("success-body")), format="json")

    # then
    assert response.status_code == 204, response.content
    events = {e.asset.name: e for e in AssetEvent.objects.select_related("asset")}
    assert set(events) == {"s3://bucket/my-task", "daily-2026-12-01"}
    assert events["s3://bucket/my-task"].extra == {"rows": 42}
    assert events["daily-2026-12-01"].extra == {"rows": 7}
    for event in events.values():
        assert [a.name for a in event.source_aliases.all()] == ["example-alias"]
    daily = events["daily-2026-12-01"].asset
    assert (daily.uri, daily.extra) == ("s3://bucket/daily/2026-12-01", {"format": "parquet"})
    assert not AssetActive.objects.filter(asset=daily).exists()
    assert set(AssetAliasAsset.objects.values_list("asset__name", flat=True)) == {
        "s3://bucket/my-task",
        "daily-2026-12-01",
    }
    assert set(AssetDagRunQueue.objects.values_list("target_dag_id", flat=True)) == {
        "asset_s3_bucket_consumer",
        "asset_alias_example_alias_consumer",
    }
