"""Asset watchers (AIP-82, ``services.runs.watchers``): which watchers' triggers run (a DAG
that schedules on the asset unpaused), kept across loads, stopped on pause, removal and
staleness; each event an asset event with Airflow's extra, registered exactly once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from assets_app.models import (
    AssetDagRunQueue,
    AssetEvent,
    AssetWatcher,
    Dag,
    Trigger,
    TriggerFiring,
)
from assets_app.services.dags.declare import dags_declare, dags_set_paused
from assets_app.services.dags.manifest import manifest_parse
from assets_app.services.runs.triggers import (
    triggerer_register,
    triggers_assigned,
    triggers_claim,
    triggers_clean,
)
from assets_app.services.runs.watchers import (
    asset_watchers_sync,
    watcher_event_submit,
    watcher_triggers,
)

pytestmark = pytest.mark.django_db

DELETE = "airflow.providers.standard.triggers.file.FileDeleteTrigger"


def kwargs_text(path: str) -> str:
    return json.dumps({"filepath": path, "poke_interval": 0.1}, sort_keys=True)


def watcher(asset: str, name: str, path: str) -> dict[str, Any]:
    return {
        "asset": {"name": asset, "uri": asset},
        "name": name,
        "classpath": DELETE,
        "kwargs": kwargs_text(path),
    }


def declare(
    tmp_path: Path,
    dag_id: str,
    *,
    schedule: list[str] | None,
    watchers: list[dict[str, Any]],
    paused: bool | None = None,
) -> None:
    dag: dict[str, Any] = {
        "dag_id": dag_id,
        "airflow_dag_file": "dag.py",
        "tasks": [{"task_id": "t"}],
        "asset_watchers": watchers,
        "schedule": {"any": [{"asset": {"name": a, "uri": a}} for a in schedule]}
        if schedule
        else None,
    }
    if not schedule:
        dag["tasks"][0]["outlets"] = [{"asset": {"name": w["asset"]["name"]}} for w in watchers]
    if paused is not None:
        dag["is_paused"] = paused
    manifest = manifest_parse(yaml.safe_load(yaml.safe_dump({"dags": [dag]})), base_dir=tmp_path)
    dags_declare(manifest=manifest, fileloc=str(tmp_path / f"{dag_id}.yaml"))


def running() -> set[tuple[str, str, int]]:
    return set(AssetWatcher.objects.values_list("asset__name", "name", "trigger_id"))


def test_a_watcher_runs_while_an_unpaused_dag_schedules_on_its_asset(tmp_path):
    # given a DAG scheduled on an asset with a watcher
    declare(tmp_path, "consumer", schedule=["file"], watchers=[watcher("file", "w", "/data/x")])

    # then the watcher runs: its trigger exists, with the declared classpath and kwargs
    ((asset, name, trigger_id),) = running()
    assert (asset, name) == ("file", "w")
    trigger = Trigger.objects.get(pk=trigger_id)
    assert (trigger.classpath, trigger.kwargs) == (DELETE, kwargs_text("/data/x"))

    # and a triggerer claims it like any trigger (no task instance waits on it), and the
    # clean-up of unused triggers leaves it
    row = triggerer_register(hostname="h", pid=1, capacity=10)
    assert triggers_clean() == 0
    assert triggers_claim(triggerer_id=row.pk, capacity=10).claimed == 1
    (work,) = triggers_assigned(triggerer_id=row.pk)
    assert work.id == trigger_id
    assert watcher_triggers([trigger_id])[trigger_id].label == "asset 'file' watcher 'w'"

    # when the file is loaded again unchanged: the same trigger (not made again)
    declare(tmp_path, "consumer", schedule=["file"], watchers=[watcher("file", "w", "/data/x")])
    assert running() == {("file", "w", trigger_id)}
    assert asset_watchers_sync().created == 0

    # when the DAG is paused: the watcher stops, its trigger is deleted
    dags_set_paused(dag_ids=["consumer"], is_paused=True)
    assert running() == set()
    assert not Trigger.objects.exists()
    assert triggers_assigned(triggerer_id=row.pk) == []

    # when it is unpaused: it runs again (a new trigger)
    dags_set_paused(dag_ids=["consumer"], is_paused=False)
    ((_, _, again),) = running()
    assert again != trigger_id

    # when the watcher is removed from the file: it stops
    declare(tmp_path, "consumer", schedule=["file"], watchers=[])
    assert running() == set()
    assert not Trigger.objects.exists()


def test_a_watcher_changed_in_the_file_is_a_new_trigger_and_the_dag_going_stale_stops_it(
    tmp_path,
):
    declare(tmp_path, "consumer", schedule=["file"], watchers=[watcher("file", "w", "/data/x")])
    ((_, _, first),) = running()

    # when the watcher's trigger arguments change: a new trigger replaces the old one
    declare(tmp_path, "consumer", schedule=["file"], watchers=[watcher("file", "w", "/data/y")])
    ((_, _, second),) = running()
    assert second != first
    assert list(Trigger.objects.values_list("pk", flat=True)) == [second]

    # when the DAG goes stale (its file no longer declares it): the watcher stops at the
    # next sync (the triggerer's pass)
    Dag.objects.filter(dag_id="consumer").update(is_stale=True)
    assert asset_watchers_sync().removed == 1
    assert running() == set()


def test_a_watcher_on_an_asset_no_unpaused_dag_schedules_on_does_not_run(tmp_path):
    # given a watcher declared on a task's outlet only, and one on a paused DAG's schedule
    declare(tmp_path, "producer", schedule=None, watchers=[watcher("out", "w", "/data/o")])
    declare(
        tmp_path,
        "paused",
        schedule=["file"],
        watchers=[watcher("file", "w", "/data/x")],
        paused=True,
    )
    assert running() == set()

    # when another, unpaused, DAG schedules on the outlet asset: its watcher runs (Airflow
    # activates an asset's watchers when any unpaused DAG schedules on it)
    declare(tmp_path, "consumer", schedule=["out"], watchers=[])
    assert {(a, n) for a, n, _ in running()} == {("out", "w")}


def test_two_assets_with_the_same_trigger_share_it_and_each_gets_the_event(tmp_path):
    declare(
        tmp_path,
        "consumer",
        schedule=["a", "b"],
        watchers=[watcher("a", "wa", "/data/same"), watcher("b", "wb", "/data/same")],
    )
    (trigger_id,) = {t for _, _, t in running()}
    assert len(running()) == 2

    events = watcher_event_submit(trigger_id=trigger_id, sequence=1, payload=True)

    assert sorted(e.asset.name for e in events) == ["a", "b"]


def test_each_event_is_an_asset_event_with_airflows_extra_registered_once(tmp_path):
    declare(tmp_path, "consumer", schedule=["file"], watchers=[watcher("file", "w", "/data/x")])
    ((_, _, trigger_id),) = running()

    # when the trigger's first event is submitted
    (event,) = watcher_event_submit(trigger_id=trigger_id, sequence=1, payload={"filepath": "x"})

    # then it is an asset event as Airflow's, and its consumer is queued
    assert event.asset.name == "file"
    assert event.extra == {"from_trigger": True, "payload": {"filepath": "x"}}
    assert (event.source_dag_id, event.source_task_id, event.source_run_id) == (None, None, None)
    assert AssetDagRunQueue.objects.filter(target_dag_id="consumer").count() == 1

    # when the same event comes again (another triggerer ran the trigger too): nothing
    assert watcher_event_submit(trigger_id=trigger_id, sequence=1, payload={"filepath": "x"}) == []
    assert AssetEvent.objects.count() == 1

    # when the trigger's second event has the same payload (the file deleted again): it is
    # another event
    assert len(watcher_event_submit(trigger_id=trigger_id, sequence=2, payload={"filepath": "x"}))
    assert AssetEvent.objects.count() == 2
    firing = TriggerFiring.objects.get(trigger_id=trigger_id, sequence=2)
    assert firing.event_ids == [AssetEvent.objects.order_by("pk").last().pk]

    # and a triggerer starting the trigger now numbers its events from 2
    assert watcher_triggers([trigger_id])[trigger_id].sequence == 2

    # when the watcher stopped: an event of its trigger arriving late registers nothing
    dags_set_paused(dag_ids=["consumer"], is_paused=True)
    assert watcher_event_submit(trigger_id=trigger_id, sequence=3, payload=True) == []
    assert AssetEvent.objects.count() == 2


def test_api_v2_and_the_admin_show_an_assets_watchers(tmp_path, admin_client, admin_user):
    from assets_app.models import Asset
    from publicapi.auth import user_token_issue
    from tests.assets_app.admin import change
    from tests.publicapi.conftest import Api

    declare(tmp_path, "consumer", schedule=["file"], watchers=[watcher("file", "w", "/data/x")])
    declare(
        tmp_path,
        "paused",
        schedule=["other"],
        watchers=[watcher("other", "idle", "/data/o")],
        paused=True,
    )
    ((_, _, trigger_id),) = running()
    trigger = Trigger.objects.get(pk=trigger_id)

    # /api/v2/assets: Airflow's AssetResponse.watchers (name, trigger id, trigger's creation)
    api = Api(user_token_issue(user=admin_user))
    listed = {a["name"]: a for a in api.get("assets").json()["assets"]}
    assert listed["file"]["watchers"] == [
        {
            "name": "w",
            "trigger_id": trigger_id,
            "created_date": trigger.created_date.isoformat().replace("+00:00", "Z"),
        }
    ]
    assert listed["other"]["watchers"] == []
    one = api.get(f"assets/{listed['file']['id']}").json()
    assert one["watchers"] == listed["file"]["watchers"]

    # the asset's admin page: the watcher, its trigger and who runs it
    page = admin_client.get(change("asset", Asset.objects.get(name="file").pk)).content.decode()
    assert "FileDeleteTrigger" in page
    assert f"trigger {trigger_id}, waiting for a triggerer to claim it" in page
    row = triggerer_register(hostname="host-a", pid=42, capacity=10)
    triggers_claim(triggerer_id=row.pk, capacity=10)
    page = admin_client.get(change("asset", Asset.objects.get(name="file").pk)).content.decode()
    assert f"trigger {trigger_id}, run by triggerer {row.pk} (host-a pid 42)" in page
    other = admin_client.get(change("asset", Asset.objects.get(name="other").pk)).content.decode()
    assert "not running: no unpaused DAG schedules on this asset" in other
