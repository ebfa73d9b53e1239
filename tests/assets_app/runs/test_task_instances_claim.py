"""``task_instances_claim``: scheduled → queued, oldest runs first, paused/stale DAGs left alone."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from assets_app.models import Dag, TaskInstance, TaskInstanceState
from assets_app.services.runs.claims import task_instances_claim
from tests.factories import DagFactory, DagRunFactory, TaskInstanceFactory

pytestmark = pytest.mark.django_db


def scheduled(dag_id: str, *, age_seconds: int, task_id: str = "t") -> TaskInstance:
    run = DagRunFactory(
        dag=DagFactory(dag_id=dag_id), run_after=timezone.now() - timedelta(seconds=age_seconds)
    )
    return TaskInstanceFactory(dag_run=run, task_id=task_id, state=TaskInstanceState.SCHEDULED)


def test_claims_the_oldest_scheduled_task_instances_up_to_the_limit():
    # given
    newest = scheduled("a", age_seconds=1)
    oldest = scheduled("b", age_seconds=30)
    middle = scheduled("c", age_seconds=10)
    TaskInstanceFactory(state=TaskInstanceState.QUEUED)  # made by hand for an outside runner

    # when
    claimed = task_instances_claim(limit=2)

    # then
    assert [ti.pk for ti in claimed] == [oldest.pk, middle.pk]
    assert all(ti.state == TaskInstanceState.QUEUED for ti in claimed)
    states = dict(TaskInstance.objects.values_list("pk", "state"))
    assert states[oldest.pk] == states[middle.pk] == TaskInstanceState.QUEUED
    assert states[newest.pk] == TaskInstanceState.SCHEDULED
    assert [ti.pk for ti in task_instances_claim(limit=5)] == [newest.pk]
    assert task_instances_claim(limit=5) == []


def test_paused_and_stale_dags_are_not_claimed():
    paused = scheduled("paused", age_seconds=5)
    stale = scheduled("stale", age_seconds=5)
    Dag.objects.filter(dag_id="paused").update(is_paused=True)
    Dag.objects.filter(dag_id="stale").update(is_stale=True)

    assert task_instances_claim(limit=10) == []
    assert set(TaskInstance.objects.values_list("pk", "state")) == {
        (paused.pk, TaskInstanceState.SCHEDULED),
        (stale.pk, TaskInstanceState.SCHEDULED),
    }


def test_a_limit_below_one_claims_nothing():
    scheduled("a", age_seconds=1)
    assert task_instances_claim(limit=0) == []
