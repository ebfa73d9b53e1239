"""``depends_on_past``, ``wait_for_downstream`` and ``ignore_first_depends_on_past`` as
Airflow 3.3's ``PrevDagrunDep``: a task instance waits without a state until the same task in
the previous run (by logical date) succeeded or was skipped, says so on its page, and is
released by the scheduler's pass once the past is done (also after a clear)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import yaml
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from assets_app.models import DagRun, TaskInstance
from assets_app.services.dags.declare import dags_declare
from assets_app.services.dags.manifest import manifest_parse
from assets_app.services.runs.advance import task_instances_advance
from assets_app.services.runs.clearing import task_instances_clear, task_instances_select
from assets_app.services.runs.dag_runs import dag_run_trigger
from assets_app.services.runs.past import task_instance_past_wait
from tests.assets_app.runs.test_task_flow import finish, states

pytestmark = pytest.mark.django_db

DAY = datetime(2026, 1, 1, tzinfo=UTC)

PAST = """
dags:
  - dag_id: daily
    max_active_runs: 5
    tasks:
      - {task_id: load, depends_on_past: true}
      - {task_id: report, upstream: [load]}
  - dag_id: careful
    max_active_runs: 5
    tasks:
      - {task_id: load, wait_for_downstream: true}
      - {task_id: report, upstream: [load]}
"""


def declare(text: str = PAST) -> None:
    dags_declare(manifest=manifest_parse(yaml.safe_load(text)), fileloc="past.yaml")


def run_on(dag_id: str, day: int) -> DagRun:
    run = dag_run_trigger(dag_id=dag_id, logical_date=DAY + timedelta(days=day))
    task_instances_advance()  # the scheduler's pass
    return run


def load(run: DagRun) -> TaskInstance:
    return TaskInstance.objects.get(dag_run=run, task_id="load")


def test_the_first_run_passes_and_the_next_waits_for_the_past_to_succeed(admin_client):
    declare()
    first = run_on("daily", 0)
    assert states(first)["load"] == "scheduled"  # no previous run: it passes

    # when the first run's load fails, the second run's load waits without a state
    finish(first, "load", "failed")
    second = run_on("daily", 1)
    task_instances_advance()
    assert states(second) == {"load": None, "report": None}
    why = task_instance_past_wait(load(second))
    assert "not in a successful state (failed in run manual__2026-01-01T00:00:00+00:00)" in why
    page = admin_client.get(reverse("admin:assets_app_taskinstance_change", args=[load(second).pk]))
    assert page.status_code == 200
    assert "Waiting for:" in page.content.decode()
    assert "are not in a successful state (failed in run" in page.content.decode()

    # a clear of the past and its success release it on the next pass
    task_instances_clear(
        task_instances=task_instances_select(dag_id="daily", run_id=first.run_id, task_id="load")
    )
    task_instances_advance()
    assert states(second)["load"] is None  # the past runs again: still waiting
    finish(first, "load", "success")
    task_instances_advance()
    assert states(second)["load"] == "scheduled"
    assert task_instance_past_wait(load(second)) == ""


def test_a_run_waits_for_the_run_before_it_by_logical_date_not_by_creation():
    declare()
    first = run_on("daily", 0)
    finish(first, "load", "success")
    later = dag_run_trigger(dag_id="daily", logical_date=DAY + timedelta(days=5))
    earlier = dag_run_trigger(dag_id="daily", logical_date=DAY + timedelta(days=2))
    task_instances_advance()
    assert states(earlier)["load"] == "scheduled"  # its past (day 0) succeeded
    assert states(later)["load"] is None  # its past is day 2, created after it
    assert "(scheduled in run manual__2026-01-03" in task_instance_past_wait(load(later))
    finish(earlier, "load", "skipped")
    task_instances_advance()
    assert states(later)["load"] == "scheduled"  # a skip counts as done


def test_wait_for_downstream_also_waits_for_the_previous_tries_downstreams():
    declare()
    first = run_on("careful", 0)
    finish(first, "load", "success")
    second = run_on("careful", 1)
    assert states(first)["report"] == "scheduled"
    assert states(second)["load"] is None
    assert "wait_for_downstream is True" in task_instance_past_wait(load(second))
    finish(first, "report", "success")
    task_instances_advance()
    assert states(second)["load"] == "scheduled"


def test_a_run_without_a_logical_date_has_no_past():
    declare()
    first = run_on("daily", 0)
    finish(first, "load", "failed")
    DagRun.objects.filter(pk=first.pk).update(logical_date=None)
    second = run_on("daily", 1)  # its previous run has no logical date to be ordered by
    assert states(second)["load"] == "scheduled"


NEW_TASK = """
dags:
  - dag_id: lenient
    tasks: [{task_id: report}%s]
  - dag_id: strict
    tasks: [{task_id: report}%s]
"""


def test_a_task_new_to_the_dag_passes_only_if_ignore_first_depends_on_past():
    declare(NEW_TASK % ("", ""))
    lenient, strict = run_on("lenient", 0), run_on("strict", 0)
    assert {lenient.run_id, strict.run_id}  # the runs before the task existed
    # when a task depending on the past is added to both DAGs
    declare(
        NEW_TASK
        % (
            ", {task_id: load, depends_on_past: true}",
            ", {task_id: load, depends_on_past: true, ignore_first_depends_on_past: false}",
        )
    )
    lenient, strict = run_on("lenient", 1), run_on("strict", 1)
    # then the default (Airflow 3's) lets its first task instance run; the other waits
    assert states(lenient)["load"] == "scheduled"
    assert states(strict)["load"] is None
    assert "the previous task instance has not run yet" in task_instance_past_wait(load(strict))


def test_waiting_runs_cost_the_pass_a_fixed_number_of_statements():
    declare()
    first = run_on("daily", 0)
    finish(first, "load", "failed")
    counts = []
    for extra in (2, 12):
        for day in range(extra):
            dag_run_trigger(dag_id="daily", logical_date=DAY + timedelta(days=100 * extra + day))
        with CaptureQueriesContext(connection) as queries:
            task_instances_advance()
        counts.append(len(queries))
    assert counts[0] == counts[1], counts
