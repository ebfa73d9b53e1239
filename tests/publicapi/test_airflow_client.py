"""Airflow's own REST client (``apache-airflow-client``) and CLI (``airflowctl``) against a live
server: no hand-written HTTP beyond the login, which the client has no API for (its docs post
to ``/auth/token`` the same way)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from airflow_client.client import ApiClient, Configuration
from airflow_client.client.api.asset_api import AssetApi
from airflow_client.client.api.dag_api import DAGApi
from airflow_client.client.api.dag_run_api import DagRunApi
from airflow_client.client.api.dag_source_api import DagSourceApi
from airflow_client.client.api.dag_stats_api import DagStatsApi
from airflow_client.client.api.event_log_api import EventLogApi
from airflow_client.client.api.task_api import TaskApi
from airflow_client.client.exceptions import ForbiddenException, UnauthorizedException
from airflow_client.client.models.create_asset_events_body import CreateAssetEventsBody
from airflow_client.client.models.dag_patch_body import DAGPatchBody
from django.contrib.auth.models import Group, Permission, User

from assets_app.models import AssetDagRunQueue, AssetEvent, Dag, DagRun, DagTask
from assets_app.services.dags.code import dag_code_store
from tests.factories import AssetFactory, DagFactory, DagRunFactory
from tests.publicapi.conftest import READ_PERMISSIONS

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

AIRFLOWCTL = Path(sys.executable).with_name("airflowctl")


def login(url: str, username: str, password: str) -> str:
    response = httpx.post(f"{url}/auth/token", json={"username": username, "password": password})
    assert response.status_code == 201, response.text
    return str(response.json()["access_token"])


def api_client(url: str, token: str | None) -> ApiClient:
    return ApiClient(Configuration(host=url, access_token=token))


def test_airflows_client_drives_the_registry(server):
    User.objects.create_superuser("ops", "ops@example.com", "s3cret")
    asset = AssetFactory(name="landed", uri="s3://bucket/landed")
    DagFactory(dag_id="consumer", tags=["finance", "nightly"], fileloc="/srv/dags/consumer.py")
    dag_code_store(fileloc="/srv/dags/consumer.py", source="from airflow.sdk import DAG\n")
    run = DagRunFactory(dag=DagFactory(dag_id="producer"), run_id="manual__1", state="success")
    AssetDagRunQueue.objects.create(asset=asset, target_dag=Dag.objects.get(dag_id="consumer"))
    client = api_client(server.url, login(server.url, "ops", "s3cret"))
    assets, dags, runs = AssetApi(client), DAGApi(client), DagRunApi(client)

    created = assets.create_asset_event(
        CreateAssetEventsBody(asset_id=asset.pk, extra={"rows": 42})
    )
    assert created.asset_id == asset.pk
    assert created.extra == {"rows": 42}
    listed = assets.get_asset_events(asset_id=asset.pk)
    assert [e.id for e in listed.asset_events] == [created.id]
    assert AssetEvent.objects.get().extra == {"rows": 42}

    # a tagged DAG parses in the client's models (tags carry dag_display_name)
    tagged = dags.get_dag("consumer")
    assert sorted(tag.name for tag in tagged.tags) == ["finance", "nightly"]
    assert {tag.dag_display_name for tag in tagged.tags} == {"consumer"}
    assert {d.dag_id for d in dags.get_dags().dags} == {"consumer", "producer"}
    paused = dags.patch_dag("consumer", DAGPatchBody(is_paused=True))
    assert paused.is_paused is True
    assert [tag.name for tag in paused.tags] == ["finance", "nightly"]
    assert Dag.objects.get(dag_id="consumer").is_paused is True

    details = dags.get_dag_details("consumer")
    assert (details.dag_id, details.has_import_errors, details.active_runs_count) == (
        "consumer",
        False,
        0,
    )

    DagTask.objects.create(dag_id="consumer", task_id="summarise", retries=2)
    (listed_task,) = TaskApi(client).get_tasks("consumer").tasks
    assert (listed_task.task_id, listed_task.retries, listed_task.pool) == (
        "summarise",
        2,
        "default_pool",
    )

    # the DAG's file as loaded
    source = DagSourceApi(client).get_dag_source("consumer")
    assert (source.content, source.version_number) == ("from airflow.sdk import DAG\n", 1)

    stats = DagStatsApi(client).get_dag_stats(dag_ids=["producer"])
    (producer_stats,) = stats.dags
    assert {s.state.value: s.count for s in producer_stats.stats}["success"] == 1

    every = runs.get_dag_runs("~")
    assert [r.dag_run_id for r in every.dag_runs] == ["manual__1"]
    one = runs.get_dag_run("producer", "manual__1")
    assert one.state.value == "success"
    assert one.dag_id == run.dag_id

    queued = assets.get_dag_asset_queued_events("consumer")
    assert [e.asset_id for e in queued.queued_events] == [asset.pk]
    assets.delete_dag_asset_queued_events("consumer")
    assert not AssetDagRunQueue.objects.filter(target_dag_id="consumer").exists()

    # the pause above, in the event log, read back through the client's models
    event_logs = EventLogApi(client)
    logged = event_logs.get_event_logs(dag_id="consumer", event="patch_dag")
    assert logged.total_entries == 1
    (entry,) = logged.event_logs
    assert (entry.owner, entry.dag_id, json.loads(entry.extra)["via"]) == (
        "ops",
        "consumer",
        "rest_api",
    )
    assert event_logs.get_event_log(entry.event_log_id).event == "patch_dag"


def test_the_client_is_refused_without_a_token_or_permission(server):
    group = Group.objects.create(name="readers")
    group.permissions.set(Permission.objects.filter(codename__in=READ_PERMISSIONS))
    User.objects.create_user("reader", password="pw").groups.add(group)
    DagFactory(dag_id="d")
    with pytest.raises(UnauthorizedException):
        DAGApi(api_client(server.url, None)).get_dags()
    reader = DAGApi(api_client(server.url, login(server.url, "reader", "pw")))
    assert [d.dag_id for d in reader.get_dags().dags] == ["d"]
    with pytest.raises(ForbiddenException):
        reader.patch_dag("d", DAGPatchBody(is_paused=True))
    assert Dag.objects.get(dag_id="d").is_paused is False


def airflowctl(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        # the token goes to a file under AIRFLOW_HOME instead of a system keyring
        "AIRFLOW_CLI_DEBUG_MODE": "true",
    }
    return subprocess.run(
        [str(AIRFLOWCTL), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_airflowctl_logs_in_and_lists_assets_and_dag_runs(server, tmp_path):
    User.objects.create_superuser("ops", "ops@example.com", "s3cret")
    from assets_app.models import AssetActive

    asset = AssetFactory(name="landed", uri="s3://bucket/landed")
    AssetActive.objects.create(asset=asset, name=asset.name, uri=asset.uri)
    DagRunFactory(dag=DagFactory(dag_id="producer"), run_id="manual__1", state="success")
    logged_in = airflowctl(
        "auth",
        "login",
        "--api-url",
        server.url,
        "--username",
        "ops",
        "--password",
        "s3cret",
        home=tmp_path,
    )
    assert logged_in.returncode == 0, logged_in.stdout + logged_in.stderr
    listed = airflowctl("assets", "list", "--output", "json", home=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert [a["name"] for a in json.loads(listed.stdout)] == ["landed"]
    # without --limit this airflowctl sends ``limit=`` (empty): a 422, from Airflow's FastAPI too
    runs = airflowctl("dagrun", "list", "--limit", "10", "--output", "json", home=tmp_path)
    assert runs.returncode == 0, runs.stdout + runs.stderr
    (page,) = json.loads(runs.stdout)  # airflowctl prints the collection as one item
    assert [(r["dag_id"], r["dag_run_id"]) for r in page["dag_runs"]] == [("producer", "manual__1")]


def test_airflows_client_triggers_a_run_that_the_worker_finishes(server, tmp_path):
    from io import StringIO

    from airflow_client.client.models.trigger_dag_run_post_body import TriggerDAGRunPostBody
    from django.core.management import call_command

    from tests.live_server import REPO, server_env

    call_command("declare_dags", str(REPO / "examples" / "dags.yaml"), stdout=StringIO())
    User.objects.create_superuser("ops", "ops@example.com", "s3cret")
    runs = DagRunApi(api_client(server.url, login(server.url, "ops", "s3cret")))

    triggered = runs.trigger_dag_run(
        "asset_s3_bucket_producer",
        TriggerDAGRunPostBody(dag_run_id="from_the_client", logical_date=None, conf={"n": 1}),
    )
    assert triggered.dag_run_id == "from_the_client"
    assert triggered.state == "running"  # started at once: its DAG has room

    worker = subprocess.run(
        [
            *(sys.executable, "manage.py", "worker", "--once", "--server", server.url),
            *("--log-dir", str(tmp_path / "logs")),
        ],
        cwd=REPO,
        env=server_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert worker.returncode == 0, worker.stdout + worker.stderr
    finished = runs.get_dag_run("asset_s3_bucket_producer", "from_the_client")
    assert finished.state == "success", worker.stdout
    assert finished.conf == {"n": 1}


def test_airflowctl_triggers_a_run_and_watches_the_worker_finish_it(server, tmp_path):
    """``airflowctl dags trigger``, then ``airflowctl dagrun get`` polled while a real worker
    (``manage.py worker``, running until stopped) claims and runs the run's task."""
    import time
    from io import StringIO

    from django.core.management import call_command

    from tests.live_server import REPO, server_env

    call_command("declare_dags", str(REPO / "examples" / "dags.yaml"), stdout=StringIO())
    User.objects.create_superuser("ops", "ops@example.com", "s3cret")
    login = ("auth", "login", "--api-url", server.url, "--username", "ops", "--password", "s3cret")
    logged_in = airflowctl(*login, home=tmp_path)
    assert logged_in.returncode == 0, logged_in.stdout + logged_in.stderr

    # given a run triggered through the CLI
    dag_id = "asset_s3_bucket_producer"
    # (no --conf: this airflowctl parses it with ``dict``, which takes no JSON text)
    triggered = airflowctl("dags", "trigger", dag_id, "--dag-run-id", "from_ctl", home=tmp_path)
    assert triggered.returncode == 0, triggered.stdout + triggered.stderr
    (created,) = json.loads(triggered.stdout)  # airflowctl prints one item as a list
    assert (created["dag_run_id"], created["state"]) == ("from_ctl", "running")  # it has room

    # when the CLI watches the run: once before a worker starts (so it is seen running however
    # fast the worker is), then while a worker runs until stopped
    seen: list[str] = []

    def watch() -> dict[str, Any]:
        got = airflowctl("dagrun", "get", dag_id, "from_ctl", home=tmp_path)
        assert got.returncode == 0, got.stdout + got.stderr
        (run,) = json.loads(got.stdout)
        if not seen or seen[-1] != run["state"]:
            seen.append(run["state"])
        return run

    watch()
    worker = subprocess.Popen(
        [
            *(sys.executable, "manage.py", "worker", "--server", server.url),
            *("--poll-interval", "0.2", "--log-dir", str(tmp_path / "logs")),
        ],
        cwd=REPO,
        env=server_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            run = watch()
            if run["state"] in ("success", "failed"):
                break
            time.sleep(0.3)
    finally:
        worker.terminate()
        output, _ = worker.communicate(timeout=60)

    # then it was seen running and then finished, as the worker reported it
    assert seen[-1] == "success", (seen, output)
    assert seen[0] == "running", seen
    assert run["end_date"] is not None
    stored = DagRun.objects.get(dag_id=dag_id, run_id="from_ctl")
    assert (stored.state, stored.task_instances.get().state) == ("success", "success")


def test_airflows_client_reads_a_mapped_tasks_instances(server):
    """Issue 38: ``get_mapped_task_instances`` / ``get_mapped_task_instance`` on a run whose
    mapped task expanded (labels from its ``map_index_template``); an unmapped task's list is
    Airflow's 404."""
    from airflow_client.client.api.task_instance_api import TaskInstanceApi
    from airflow_client.client.exceptions import NotFoundException

    from assets_app.services.dags.declare import dags_declare
    from assets_app.services.dags.manifest import manifest_parse
    from assets_app.services.runs.advance import task_instances_advance
    from assets_app.services.runs.dag_runs import dag_run_trigger

    User.objects.create_superuser("ops", "ops@example.com", "s3cret")
    manifest = {
        "dags": [
            {
                "dag_id": "nightly_tables",
                "tags": ["mapping", "nightly"],
                "tasks": [
                    {"task_id": "list_tables"},
                    {"task_id": "copy_table", "mapped": {"length": 3, "group": None}},
                ],
            }
        ]
    }
    dags_declare(manifest=manifest_parse(manifest), fileloc="tables.yaml")
    run = dag_run_trigger(dag_id="nightly_tables", run_id="scheduled__2026-12-05T00:00:00+00:00")
    task_instances_advance(dag_run_ids=[run.pk])
    from assets_app.models import TaskInstance

    TaskInstance.objects.filter(task_id="copy_table", map_index=1).update(
        rendered_map_index="table=customers", state="failed"
    )
    tis = TaskInstanceApi(api_client(server.url, login(server.url, "ops", "s3cret")))

    listed = tis.get_mapped_task_instances("nightly_tables", run.run_id, "copy_table")
    assert listed.total_entries == 3
    assert [t.map_index for t in listed.task_instances] == [0, 1, 2]
    failed = tis.get_mapped_task_instances(
        "nightly_tables", run.run_id, "copy_table", state=["failed"]
    )
    assert [t.map_index for t in failed.task_instances] == [1]
    one = tis.get_mapped_task_instance("nightly_tables", run.run_id, "copy_table", 1)
    assert (one.map_index, one.rendered_map_index, one.state.value) == (
        1,
        "table=customers",
        "failed",
    )
    with pytest.raises(NotFoundException):
        tis.get_mapped_task_instances("nightly_tables", run.run_id, "list_tables")
    with pytest.raises(NotFoundException):
        tis.get_mapped_task_instance("nightly_tables", run.run_id, "copy_table", 7)

    # Airflow's "mark success" of one map index, through the client's model of the body
    from airflow_client.client.exceptions import BadRequestException
    from airflow_client.client.models.patch_task_instance_body import PatchTaskInstanceBody

    marked = tis.patch_task_instance_by_map_index(
        "nightly_tables",
        run.run_id,
        "copy_table",
        1,
        PatchTaskInstanceBody(new_state="success"),
    )
    assert [(t.map_index, t.state.value) for t in marked.task_instances] == [(1, "success")]
    assert TaskInstance.objects.get(task_id="copy_table", map_index=1).state == "success"
    with pytest.raises(BadRequestException):
        tis.patch_task_instance_by_map_index(
            "nightly_tables",
            run.run_id,
            "copy_table",
            2,
            PatchTaskInstanceBody(new_state="failed", include_downstream=True),
        )
    assert TaskInstance.objects.get(task_id="copy_table", map_index=2).state == "scheduled"
