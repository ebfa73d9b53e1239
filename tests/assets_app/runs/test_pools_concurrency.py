"""Two claims at once on PostgreSQL: the second waits for the pool lock the first holds, then
counts what the first queued, so a 1-slot pool gets one task instance, not two (their DAGs
differ, so no DAG lock keeps them apart)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import yaml
from django.db import connections, transaction

from assets_app.models import Pool, TaskInstance
from assets_app.services.dags.declare import dags_declare
from assets_app.services.dags.manifest import manifest_parse
from assets_app.services.runs.claims import task_instances_claim
from assets_app.services.runs.dag_runs import dag_run_trigger

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_a_second_claim_waits_for_the_pool_lock_and_finds_no_slot(await_lock_wait):
    # given a 1-slot pool and two DAGs with a task instance each in it
    Pool.objects.create(pool="one", slots=1)
    manifest = """
dags:
  - {dag_id: left, tasks: [{task_id: t, pool: one}]}
  - {dag_id: right, tasks: [{task_id: t, pool: one}]}
"""
    dags_declare(manifest=manifest_parse(yaml.safe_load(manifest)), fileloc="pools.yaml")
    dag_run_trigger(dag_id="left")
    dag_run_trigger(dag_id="right")
    first_claimed = threading.Event()
    release = threading.Event()

    def first() -> list[str]:
        try:
            with transaction.atomic():
                claimed = task_instances_claim(limit=1)
                first_claimed.set()
                release.wait(timeout=30)  # hold the pool lock, the claim not yet committed
            return [ti.dag_id for ti in claimed]
        finally:
            connections.close_all()

    def second() -> list[str]:
        try:
            return [ti.dag_id for ti in task_instances_claim(limit=5)]
        finally:
            connections.close_all()

    # when a second claim starts while the first holds the pool
    with ThreadPoolExecutor(2) as pool:
        one = pool.submit(first)
        assert first_claimed.wait(timeout=30)
        two = pool.submit(second)
        waiting = await_lock_wait(query_like='%FROM "slot_pool"%FOR UPDATE%')
        release.set()
        got = one.result(timeout=30) + two.result(timeout=30)

    # then it waited on the lock, and the pool got exactly one task instance
    assert waiting == 1
    assert len(got) == 1
    assert TaskInstance.objects.filter(state="queued").count() == 1
    assert TaskInstance.objects.filter(state="scheduled").count() == 1
