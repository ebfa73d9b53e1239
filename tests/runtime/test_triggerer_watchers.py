"""Asset watchers in the triggerer's pass (``runtime.triggerer`` with
``services.runs.watchers``), in this process: Airflow's ``FileDeleteTrigger`` runs as a
watcher, each deletion one asset event; its trigger stops when the DAG is paused; a watcher
whose trigger raises is started again after a delay; events are numbered on from those
already registered."""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path

import pytest

from assets_app.models import AssetEvent, Trigger, TriggerFiring
from assets_app.services.dags.declare import dags_set_paused
from runtime.triggerer import TriggererPass
from tests.assets_app.assets.test_watchers import declare
from tests.runtime.test_triggerer import triggerer  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db

DELETE = "airflow.providers.standard.triggers.file.FileDeleteTrigger"


def file_watcher(path: Path, *, classpath: str = DELETE) -> dict:
    return {
        "asset": {"name": "file", "uri": "file"},
        "name": "deleted",
        "classpath": classpath,
        "kwargs": json.dumps({"filepath": str(path), "poke_interval": 0.05}),
    }


def passes_until(work: TriggererPass, done, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        work.run()
        if done():
            return
        time.sleep(0.05)
    raise AssertionError(f"not done after {timeout}s")


def test_a_file_delete_watcher_makes_one_asset_event_per_deletion(triggerer, tmp_path):  # noqa: F811
    watched = tmp_path / "flag"
    declare(tmp_path, "consumer", schedule=["file"], watchers=[file_watcher(watched)])
    passes_until(triggerer, lambda: len(triggerer.loop.running) == 1)
    (trigger_id,) = triggerer.loop.running

    # when the file appears: the trigger deletes it, and its event is one asset event
    watched.write_text("1")
    passes_until(triggerer, lambda: AssetEvent.objects.count() == 1)
    assert not watched.exists()
    event = AssetEvent.objects.get()
    assert event.extra == {"from_trigger": True, "payload": True}  # FileDeleteTrigger's payload

    # when it appears again (the trigger ended after its event and was started again): a
    # second event, numbered on
    passes_until(triggerer, lambda: trigger_id in triggerer.loop.running)
    watched.write_text("2")
    passes_until(triggerer, lambda: AssetEvent.objects.count() == 2)
    assert list(TriggerFiring.objects.order_by("sequence").values_list("sequence", flat=True)) == [
        1,
        2,
    ]

    # when the DAG is paused: the trigger is deleted and the triggerer cancels it
    dags_set_paused(dag_ids=["consumer"], is_paused=True)
    passes_until(triggerer, lambda: not triggerer.loop.running)
    assert not Trigger.objects.exists()
    watched.write_text("3")
    for _ in range(5):
        triggerer.run()
        time.sleep(0.1)
    assert watched.exists()
    assert AssetEvent.objects.count() == 2


def test_a_watcher_whose_trigger_raises_is_started_again_after_a_delay(
    triggerer,  # noqa: F811
    tmp_path,
    monkeypatch,
):
    monkeypatch.setattr("runtime.triggerer.WATCHER_RESTART_DELAY", 0.5)
    watched = tmp_path / "flag"
    declare(
        tmp_path,
        "consumer",
        schedule=["file"],
        watchers=[file_watcher(watched, classpath="no.such.Trigger")],
    )
    starts: list[float] = []
    add = triggerer.loop.add

    def counted(work):
        starts.append(time.monotonic())
        add(work)

    monkeypatch.setattr(triggerer.loop, "add", counted)
    passes_until(triggerer, lambda: len(starts) >= 3, timeout=10)

    # the trigger stays (a watcher's failure fails no task and stops nothing); each start
    # comes at least the delay after the previous failure
    assert Trigger.objects.count() == 1
    assert all(b - a >= 0.45 for a, b in itertools.pairwise(starts)), starts
    assert AssetEvent.objects.count() == 0
