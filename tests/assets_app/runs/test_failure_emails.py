"""``email_on_failure`` / ``email_on_retry``: a failed or retried try mails its task's
``email`` through Django's email backend after the report commits, with Airflow's default
subject and body; a task without ``email`` mails nobody."""

from __future__ import annotations

import pytest
import yaml
from django.test import TestCase

from assets_app.models import TaskInstance
from assets_app.services.dags.declare import dags_declare
from assets_app.services.dags.manifest import manifest_parse
from assets_app.services.runs.dag_runs import dag_run_trigger
from tests.executionapi.conftest import client_for, state_url, wire_sample

pytestmark = pytest.mark.django_db

DAGS = """
dags:
  - dag_id: mailed
    tasks:
      - {task_id: load, retries: 1, retry_delay: 0, email: "ops@example.com; oncall@example.com"}
  - dag_id: quiet_retry
    tasks:
      - {task_id: load, retries: 1, email: [ops@example.com], email_on_retry: false}
  - dag_id: silent
    tasks:
      - {task_id: load, retries: 1}
"""


@pytest.fixture(autouse=True)
def _dags():
    dags_declare(manifest=manifest_parse(yaml.safe_load(DAGS)), fileloc="mail.yaml")


def report(dag_id: str, state: str, **extra: object) -> None:
    ti = TaskInstance.objects.get(dag_id=dag_id)
    TaskInstance.objects.filter(pk=ti.pk).update(state="queued")
    client = client_for(ti)
    started = client.patch(
        f"/execution/task-instances/{ti.pk}/run", wire_sample("run_start"), format="json"
    )
    assert started.status_code == 200, started.content
    body = {"state": state, "end_date": "2026-12-02T00:00:00Z", **extra}
    # the test's transaction never commits: what waits for the commit runs after the report
    with TestCase.captureOnCommitCallbacks(execute=True):
        response = client.patch(state_url(ti), body, format="json")
    assert response.status_code == 204, response.content


def test_a_retry_then_a_failure_mail_the_tasks_addresses(mailoutbox):
    run = dag_run_trigger(dag_id="mailed", run_id="r1")
    report("mailed", "up_for_retry", retry_reason="ValueError: boom")
    (retry,) = mailoutbox
    assert retry.to == ["ops@example.com", "oncall@example.com"]
    assert retry.subject == "Airflow alert: <TaskInstance: mailed.load r1 [up_for_retry]>"
    assert "Try 1 out of 2" in retry.body
    assert "ValueError: boom" in retry.body
    html, kind = retry.alternatives[0]
    assert kind == "text/html"
    assert "Try 1 out of 2<br>Exception:<br>ValueError: boom" in html

    TaskInstance.objects.filter(dag_run=run).update(state="scheduled", try_number=2)
    report("mailed", "failed")
    assert len(mailoutbox) == 2
    assert mailoutbox[1].subject == "Airflow alert: <TaskInstance: mailed.load r1 [failed]>"
    assert "Try 2 out of 2" in mailoutbox[1].body


def test_no_email_or_email_on_retry_false_mails_nobody(mailoutbox):
    dag_run_trigger(dag_id="quiet_retry")
    report("quiet_retry", "up_for_retry")
    dag_run_trigger(dag_id="silent")
    report("silent", "failed")
    assert mailoutbox == []


def test_a_try_the_reaper_fails_mails_too(mailoutbox, settings):
    from datetime import timedelta

    from django.utils import timezone

    from assets_app.services.scheduling.upkeep import task_instances_reap

    run = dag_run_trigger(dag_id="mailed", run_id="r2")
    TaskInstance.objects.filter(dag_run=run).update(
        state="running", try_number=2, start_date=timezone.now(), hostname="gone-host"
    )
    with TestCase.captureOnCommitCallbacks(execute=True):
        (reaped,) = task_instances_reap(now=timezone.now() + timedelta(hours=1))
    assert reaped.state == "failed"
    (mail,) = mailoutbox
    assert mail.subject == "Airflow alert: <TaskInstance: mailed.load r2 [failed]>"
    assert "heartbeat timeout" in mail.body
    assert "Host: gone-host" in mail.body
