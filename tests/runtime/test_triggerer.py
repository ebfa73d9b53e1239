"""The triggerer's pass (``runtime.triggerer``) in this process: Airflow's own trigger classes
built from the kwargs the SDK sends, run in the asyncio loop, their events and errors
submitted; ``manage.py triggerer``'s options."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import CommandError, call_command

from assets_app.models import TaskInstance, Trigger
from assets_app.services.runs.triggers import triggerer_register
from runtime.triggerer import TriggererPass, TriggerLoop, trigger_build
from tests.assets_app.runs.test_deferral import deferred_run_extra
from tests.executionapi.conftest import client_for, state_url

pytestmark = pytest.mark.django_db


def serde(value: object) -> object:
    from airflow.sdk.serde import serialize

    return serialize(value)


def defer(ti: TaskInstance, classpath: str, kwargs: dict) -> None:
    """Report a deferral of the (running) ``ti`` as the SDK does."""
    TaskInstance.objects.filter(pk=ti.pk).update(state="running", trigger=None)
    body = {
        "state": "deferred",
        "classpath": classpath,
        "trigger_kwargs": serde(kwargs),
        "next_method": "execute_complete",
        "next_kwargs": {},
    }
    Trigger.objects.all().delete()
    response = client_for(ti).patch(state_url(ti), body, format="json")
    assert response.status_code == 204, response.content


def run_until(work: TriggererPass, done, timeout: float = 10.0) -> list[str]:
    deadline = time.monotonic() + timeout
    seen: list[str] = []
    while time.monotonic() < deadline:
        report = work.run()
        seen += report.resumed + report.failed
        if done():
            return seen
        time.sleep(0.05)
    raise AssertionError(f"not done after {timeout}s: {seen}")


@pytest.fixture
def triggerer():
    loop = TriggerLoop()
    loop.start()
    row = triggerer_register(hostname="h", pid=1, capacity=10)
    yield TriggererPass(triggerer_id=row.pk, capacity=10, loop=loop)
    loop.stop()


def test_trigger_build_decodes_the_sdks_kwargs():
    moment = datetime(2026, 12, 6, tzinfo=UTC)
    trigger = trigger_build(
        "airflow.providers.standard.triggers.temporal.DateTimeTrigger",
        __import__("json").dumps(serde({"moment": moment, "end_from_trigger": False})),
    )
    assert trigger.moment == moment
    with pytest.raises(ValueError, match="not JSON"):
        trigger_build("x.Y", "gAAAA-encrypted")


def test_a_datetime_trigger_fires_and_resumes_its_task_instance(triggerer):
    ti = deferred_run_extra()
    moment = datetime.now(UTC) + timedelta(seconds=0.5)
    defer(ti, "airflow.providers.standard.triggers.temporal.DateTimeTrigger", {"moment": moment})

    seen = run_until(triggerer, lambda: TaskInstance.objects.get(pk=ti.pk).state == "scheduled")

    ti.refresh_from_db()
    assert ti.next_method == "execute_complete"
    assert set(ti.next_kwargs) == {"event"}  # the event's payload, in the SDK's serde form
    assert len(seen) == 1
    assert Trigger.objects.count() == 0
    assert triggerer.loop.running == set()


def test_a_trigger_that_raises_schedules_its_task_instance_to_fail(triggerer):
    ti = deferred_run_extra()
    defer(ti, "airflow.providers.standard.triggers.temporal.DateTimeTrigger", {"moment": "soon"})

    run_until(triggerer, lambda: TaskInstance.objects.get(pk=ti.pk).state == "scheduled")

    ti.refresh_from_db()
    assert ti.next_method == "__fail__"
    assert ti.next_kwargs["error"] == "Trigger failure"
    assert any("moment" in line or "datetime" in line for line in ti.next_kwargs["traceback"])


def test_an_unknown_trigger_class_fails_its_task_instance(triggerer):
    ti = deferred_run_extra()
    defer(ti, "no.such.Trigger", {})

    run_until(triggerer, lambda: TaskInstance.objects.get(pk=ti.pk).state == "scheduled")

    ti.refresh_from_db()
    assert ti.next_method == "__fail__"
    assert ti.next_kwargs["traceback"][0].startswith("Trigger no.such.Trigger could not be built")


def test_a_trigger_whose_task_moved_on_is_cancelled(triggerer):
    ti = deferred_run_extra()
    far = datetime.now(UTC) + timedelta(hours=1)
    defer(ti, "airflow.providers.standard.triggers.temporal.DateTimeTrigger", {"moment": far})
    triggerer.run()
    assert triggerer.loop.running == {ti.trigger_id or Trigger.objects.get().pk}

    TaskInstance.objects.filter(pk=ti.pk).update(state="success")
    report = triggerer.run()

    assert report.cancelled == 1
    assert triggerer.loop.running == set()
    assert Trigger.objects.count() == 0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--capacity", "0"], "--capacity must be >= 1"),
        (["--interval", "-1"], "--interval must be >= 0"),
        (["--max-passes", "0"], "--max-passes must be >= 1"),
    ],
)
def test_bad_options_are_refused(argv, message):
    with pytest.raises(CommandError, match=message):
        call_command("triggerer", *argv)
