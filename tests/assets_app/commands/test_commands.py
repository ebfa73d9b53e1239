"""Operator commands: declare_dags, create_task_instance, issue_token, ensure_admin,
create_asset_event, prune_asset_events (asset_events is in
tests/executionapi/test_asset_events_command.py; the services the commands call are tested in
their own modules: test_manifest.py, test_dags.py, ...)."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command, get_commands, load_command_class
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from assets_app.models import (
    Asset,
    AssetActive,
    AssetAliasAssetEvent,
    AssetDagRunQueue,
    AssetEvent,
    Dag,
    DagRun,
    DagRunAssetEvent,
    DagRunType,
    TaskInstance,
)
from assets_app.tokens import token_decode
from tests.factories import (
    AssetAliasFactory,
    AssetEventFactory,
    AssetFactory,
    DagRunFactory,
    TaskInstanceFactory,
)
from tests.live_server import REPO

pytestmark = pytest.mark.django_db

EXAMPLE = REPO / "examples" / "dags.yaml"
COMMANDS = [
    "declare_dags",
    "create_task_instance",
    "issue_token",
    "asset_events",
    "ensure_admin",
    "create_asset_event",
    "prune_asset_events",
]

#: Options every Django command has (--verbosity, --settings, --help, ...).
COMMON_OPTIONS = {action.dest for action in BaseCommand().create_parser("manage.py", "")._actions}


def run(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_has_help(name):
    # given
    command = load_command_class(get_commands()[name], name)  # asset_events is executionapi's
    parser = command.create_parser("manage.py", name)

    # when
    text = " ".join(parser.format_help().split())

    # then its own description and a help line for each of its own arguments are printed
    # (Django's common options alone would make any help page long)
    assert f"manage.py {name}" in text
    assert command.help
    assert " ".join(command.help.split()) in text
    own = [action for action in parser._actions if action.dest not in COMMON_OPTIONS]
    assert own
    assert all(action.help for action in own)


# --- declare_dags ---------------------------------------------------------------------------


def _manifest(tmp_path: Path, document: dict, name: str = "dags.yaml") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(document))  # JSON is valid YAML
    return path


def test_declare_dags_reports_what_it_declared():
    # when
    first, _ = run("declare_dags", str(EXAMPLE))
    again, _ = run("declare_dags", str(EXAMPLE))

    # then
    assert first == (
        f"Declared 4 DAG(s) from {EXAMPLE}: 1 asset(s) created, 0 updated, 1 alias(es) "
        "created, 1 asset(s) activated, 0 deactivated\n"
    )
    assert "Declared 4 DAG(s)" in again
    assert "0 asset(s) created" in again


def test_declare_dags_names_stale_dags_and_warns_of_moved_ones(tmp_path):
    # given
    path = _manifest(tmp_path, {"dags": [{"dag_id": "keep"}, {"dag_id": "gone"}]})
    run("declare_dags", str(path))

    # when "gone" leaves its file
    _manifest(tmp_path, {"dags": [{"dag_id": "keep"}]})
    out, err = run("declare_dags", str(path))

    # then
    assert out.rstrip().endswith("0 deactivated; marked stale: gone")
    assert err == ""

    # when another file declares "keep" (moved) and "gone" (stale: no warning)
    other = _manifest(tmp_path, {"dags": [{"dag_id": "keep"}, {"dag_id": "gone"}]}, "b.yaml")
    _, err = run("declare_dags", str(other))

    # then
    assert err == f"DAG keep moved from {path}\n"


def test_declare_dags_warns_about_an_asset_ref_that_matches_no_declared_asset(tmp_path):
    path = _manifest(
        tmp_path,
        {
            "dags": [
                {
                    "dag_id": "d",
                    "tasks": [{"task_id": "t", "outlets": [{"asset_ref": {"name": "customers"}}]}],
                }
            ]
        },
    )

    out, err = run("declare_dags", str(path))

    assert "Declared 1 DAG(s)" in out
    assert err == (
        "DAG d task t outlet: asset_ref {name: 'customers'} matches no declared asset; it "
        "resolves to nothing until a manifest declares an asset with name 'customers'\n"
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param("dags: [", "invalid YAML", id="yaml-syntax"),
        pytest.param("dags:\n  - dag_id: 'bad id'", "may only contain", id="dag-id-chars"),
        pytest.param(
            "dags:\n  - {dag_id: d, schedule: {any: [{asset: {name: a, group: x}}, "
            "{asset: {name: a, group: y}}]}}",
            "two different group values: 'x' and 'y'",
            id="group-conflict",
        ),
        pytest.param(
            "dags:\n  - {dag_id: p1, schedule: {asset: {name: n, uri: 's3://b/1'}}}\n"
            "  - {dag_id: p2, schedule: {asset: {name: n, uri: 's3://b/2'}}}",
            "would both be active with the same name 'n'",
            id="active-conflict",
        ),
    ],
)
def test_declare_dags_rejects_an_invalid_manifest_and_writes_nothing(tmp_path, content, message):
    # given
    path = tmp_path / "dags.yaml"
    path.write_text(content)

    # when
    with pytest.raises(CommandError) as error:
        run("declare_dags", str(path))

    # then
    assert message in str(error.value)
    assert not Dag.objects.exists()
    assert not Asset.objects.exists()


def test_declare_dags_missing_file_is_a_command_error(tmp_path):
    with pytest.raises(CommandError, match="no such file"):
        run("declare_dags", str(tmp_path / "nope.yaml"))


# --- create_task_instance -------------------------------------------------------------------


def test_create_task_instance_prints_one_json_line_with_a_token_for_it():
    # when
    out, _ = run("create_task_instance", "--dag-id", "d", "--task-id", "t", "--run-id", "manual__1")

    # then
    lines = out.strip().splitlines()
    assert len(lines) == 1
    printed = json.loads(lines[0])
    assert set(printed) == {"id", "token"}
    assert token_decode(printed["token"]).subject == printed["id"]
    ti = TaskInstance.objects.get(pk=printed["id"])
    assert (ti.dag_id, ti.task_id, ti.run_id, ti.map_index, ti.state, ti.max_tries) == (
        "d",
        "t",
        "manual__1",
        -1,
        "queued",
        0,
    )
    run_ = ti.dag_run
    assert (run_.run_type, run_.state) == (DagRunType.MANUAL, "running")
    assert run_.run_after is not None
    assert Dag.objects.get(dag_id="d").task_ids == ["t"]


def test_create_task_instance_options():
    # when
    out, _ = run(
        "create_task_instance",
        "--dag-id=d",
        "--task-id=t",
        "--run-id=scheduled__2025-01-01",
        "--map-index=3",
        "--state=running",
        "--max-tries=2",
        "--ttl=60",
    )

    # then
    printed = json.loads(out)
    ti = TaskInstance.objects.get(pk=printed["id"])
    assert (ti.map_index, ti.state, ti.max_tries) == (3, "running", 2)
    assert ti.start_date is not None
    assert ti.dag_run.run_type == DagRunType.SCHEDULED
    claims = token_decode(printed["token"])
    assert claims.lifetime == timedelta(seconds=60)


def test_create_task_instance_again_returns_the_same_instance_and_run():
    # given
    args = ("create_task_instance", "--dag-id=d", "--task-id=t", "--run-id=r")
    first = json.loads(run(*args)[0])

    # when
    out, err = run(*args)

    # then
    assert json.loads(out)["id"] == first["id"]
    assert "already existed" in err
    assert TaskInstance.objects.count() == DagRun.objects.count() == 1


def test_create_task_instance_for_a_declared_dag_needs_a_declared_task():
    # given
    run("declare_dags", str(EXAMPLE))

    # when / then
    with pytest.raises(CommandError, match="has no task 'nope'; its tasks: produce_asset_events"):
        run(
            "create_task_instance",
            "--dag-id=asset_s3_bucket_producer",
            "--task-id=nope",
            "--run-id=r",
        )
    out, _ = run(
        "create_task_instance",
        "--dag-id=asset_s3_bucket_producer",
        "--task-id=produce_asset_events",
        "--run-id=r",
    )
    assert TaskInstance.objects.filter(pk=json.loads(out)["id"]).exists()


@pytest.mark.parametrize(
    ("extra_args", "message"),
    [
        pytest.param(["--map-index=-2"], "map index must be -1 or more", id="map-index"),
        pytest.param(["--max-tries=-1"], "max tries must be 0 or more", id="max-tries"),
        pytest.param(["--ttl=0"], "ttl must be a positive", id="ttl"),
        pytest.param(
            ["--map-index=2147483648"],
            "map index must be -1 to 2147483647, got 2147483648",
            id="map-index-beyond-int32",
        ),
        pytest.param(
            ["--max-tries=2147483648"],
            "max tries must be 0 to 2147483647, got 2147483648",
            id="max-tries-beyond-int32",
        ),
        pytest.param(
            ["--ttl=999999999999"],
            "ttl must be at most 315360000 seconds \\(ten years\\), got 999999999999",
            id="ttl-overflow",
        ),
        pytest.param(["--dag-id=bad dag"], "dag id 'bad dag' may only contain", id="dag-id"),
        pytest.param([f"--run-id={'r' * 251}"], "run id must be 1-250", id="run-id"),
    ],
)
def test_create_task_instance_rejects_bad_input(extra_args, message):
    # given
    args = ["--dag-id=d", "--task-id=t", "--run-id=r", *extra_args]

    # when / then
    with pytest.raises(CommandError, match=message):
        run("create_task_instance", *args)
    assert not TaskInstance.objects.exists()
    assert not DagRun.objects.exists()


def test_create_task_instance_rejects_an_unknown_state():
    # the choices are named as the user types them, not as enum members
    with pytest.raises(CommandError, match=r"invalid choice: 'success' .*'queued', 'running'"):
        run("create_task_instance", "--dag-id=d", "--task-id=t", "--run-id=r", "--state=success")


# --- issue_token ----------------------------------------------------------------------------


def test_issue_token_for_an_existing_task_instance():
    # given
    ti = TaskInstanceFactory()

    # when
    out, _ = run("issue_token", str(ti.pk), "--ttl", "120")

    # then
    claims = token_decode(out.strip())
    assert claims.subject == str(ti.pk)
    assert claims.lifetime == timedelta(seconds=120)


@pytest.mark.parametrize(
    ("ti_id", "message"),
    [
        pytest.param("not-a-uuid", "malformed task instance id 'not-a-uuid'", id="malformed"),
        pytest.param(
            str(uuid.UUID(int=7)), f"no task instance with id {uuid.UUID(int=7)}", id="unknown"
        ),
    ],
)
def test_issue_token_rejects_bad_ids(ti_id, message):
    with pytest.raises(CommandError, match=message):
        run("issue_token", ti_id)


@pytest.mark.parametrize(
    ("ttl", "message"),
    [
        pytest.param("0", "ttl must be a positive", id="zero"),
        pytest.param("999999999999", "ttl must be at most 315360000 seconds", id="overflow"),
    ],
)
def test_issue_token_rejects_an_unusable_ttl(ttl, message):
    ti = TaskInstanceFactory()
    with pytest.raises(CommandError, match=message):
        run("issue_token", str(ti.pk), f"--ttl={ttl}")


def test_the_longest_ttl_is_ten_years():
    ti = TaskInstanceFactory()
    out, _ = run("issue_token", str(ti.pk), "--ttl=315360000")
    assert token_decode(out.strip()).lifetime == timedelta(days=3650)


# --- ensure_admin ---------------------------------------------------------------------------


def _printed_password(out: str) -> str:
    return out.split("password=")[1].split()[0]


def test_ensure_admin_creates_a_superuser_and_keeps_a_changed_password():
    # when
    out, _ = run("ensure_admin")

    # then
    user = get_user_model().objects.get(username="admin")
    assert user.is_superuser
    assert user.is_staff
    assert user.is_active
    first = _printed_password(out)
    assert user.check_password(first)
    assert "username=admin" in out

    # when the user changes the password and make run runs again
    user.set_password("my-own-long-password")
    user.save()
    again, _ = run("ensure_admin")

    # then it is kept and not printed
    user.refresh_from_db()
    assert user.check_password("my-own-long-password")
    assert "password unchanged" in again
    assert "password=" not in again
    assert get_user_model().objects.count() == 1

    # when asked for a new one
    reset = _printed_password(run("ensure_admin", "--reset-password")[0])
    user.refresh_from_db()
    assert reset != first
    assert user.check_password(reset)


def test_ensure_admin_with_another_username():
    out, _ = run("ensure_admin", "--username", "ops")
    assert get_user_model().objects.get(username="ops").check_password(_printed_password(out))


# --- create_asset_event ---------------------------------------------------------------------


def test_create_asset_event_records_a_manual_event_and_queues_consumers():
    # given
    run("declare_dags", str(EXAMPLE))

    # when
    out, _ = run("create_asset_event", "--uri", "s3://bucket/my-task", "--extra", '{"n": 1}')

    # then
    event = AssetEvent.objects.get()
    assert f"Created asset event {event.pk}" in out
    assert event.extra == {"n": 1}
    assert (event.source_dag_id, event.source_task_id, event.source_run_id) == (None, None, None)
    assert event.asset == AssetActive.objects.get().asset
    assert list(AssetDagRunQueue.objects.values_list("target_dag_id", flat=True)) == [
        "asset_s3_bucket_consumer"
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param([], "give --name, --uri or both", id="no-asset"),
        pytest.param(["--name=missing"], "no asset with name 'missing'", id="unknown"),
        pytest.param(
            ["--name=a", "--uri=s3://x"], "no asset with name 'a' and uri 's3://x'", id="pair"
        ),
        pytest.param(["--name=a", "--extra={"], "--extra is not valid JSON", id="bad-json"),
        pytest.param(["--name=a", "--extra=[1]"], "--extra must be a JSON object", id="not-object"),
        pytest.param(["--name=dup"], "several inactive assets have name 'dup'", id="ambiguous"),
        pytest.param(["--name=a", '--extra={"r": NaN}'], r"extra\['r'\]: ", id="nan-extra"),
    ],
)
def test_create_asset_event_rejects_bad_input(args, message):
    # given
    AssetFactory(name="a", uri="s3://b/a")
    AssetFactory(name="dup", uri="s3://b/1")
    AssetFactory(name="dup", uri="s3://b/2")

    # when / then
    with pytest.raises(CommandError, match=message):
        run("create_asset_event", *args)
    assert not AssetEvent.objects.exists()


# --- prune_asset_events ---------------------------------------------------------------------


def test_prune_asset_events_deletes_old_events_and_their_links():
    # given
    now = timezone.now()
    old = AssetEventFactory.create_batch(3, timestamp=now - timedelta(days=40))
    recent = AssetEventFactory(timestamp=now - timedelta(days=1))
    AssetAliasAssetEvent.objects.create(alias=AssetAliasFactory(), event=old[0])
    DagRunAssetEvent.objects.create(dag_run=DagRunFactory(), event=old[1])

    # when a dry run
    out, _ = run("prune_asset_events", "--older-than-days", "30", "--dry-run")

    # then nothing is deleted
    assert "Would delete 3 asset event(s)" in out
    assert AssetEvent.objects.count() == 4

    # when
    out, _ = run("prune_asset_events", "--older-than-days=30", "--batch-size=2")

    # then
    assert "Deleted 3 asset event(s)" in out
    assert list(AssetEvent.objects.all()) == [recent]
    assert not AssetAliasAssetEvent.objects.exists()
    assert not DagRunAssetEvent.objects.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["--older-than-days=-1"], "--older-than-days must be 0 or more", id="days"),
        pytest.param(
            ["--older-than-days=1", "--batch-size=0"], "--batch-size must be positive", id="batch"
        ),
        pytest.param([], "the following arguments are required: --older-than-days", id="missing"),
    ],
)
def test_prune_asset_events_rejects_bad_input(args, message):
    with pytest.raises(CommandError, match=message):
        run("prune_asset_events", *args)


def test_create_task_instance_max_tries_defaults_to_the_declared_retries(tmp_path):
    manifest = tmp_path / "dags.yaml"
    manifest.write_text("dags:\n  - dag_id: d\n    tasks: [{task_id: t, retries: 3}]\n")
    run("declare_dags", str(manifest))

    declared = json.loads(run("create_task_instance", "--dag-id=d", "--task-id=t", "--run-id=r")[0])
    undeclared = json.loads(
        run("create_task_instance", "--dag-id=other", "--task-id=t", "--run-id=r")[0]
    )

    assert TaskInstance.objects.get(pk=declared["id"]).max_tries == 3
    assert TaskInstance.objects.get(pk=undeclared["id"]).max_tries == 0
