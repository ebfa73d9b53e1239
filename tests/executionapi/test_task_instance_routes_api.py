"""/run, /heartbeat, /rtif and /validate-inlets-and-outlets."""

from __future__ import annotations

import pytest
from django.utils import timezone

from assets_app.models import Asset, AssetEvent, DagRun, DagRunAssetEvent, TaskInstance
from tests.executionapi.conftest import client_for, wire_sample
from tests.factories import AssetAliasFactory, AssetEventFactory, AssetFactory, DagFactory

pytestmark = pytest.mark.django_db

RUN_BODY = wire_sample("run_start")
#: the twelve keys Airflow's client requires, and the run's conf (``dag_run.conf``)
DAG_RUN_KEYS = {*wire_sample("run_response_minimal")["dag_run"], "conf"}


def _run(ti, body=RUN_BODY):
    return client_for(ti).patch(f"/execution/task-instances/{ti.pk}/run", body, format="json")


@pytest.mark.parametrize("state", ["queued", "restarting"])
def test_run_from_queued_or_restarting_returns_the_run_context(make_ti, state):
    ti = make_ti(state=state, max_tries=2)

    response = _run(ti)

    assert response.status_code == 200, response.content
    body = response.json()
    assert set(body["dag_run"]) == DAG_RUN_KEYS  # all thirteen keys, nulls explicit
    assert body["dag_run"]["conf"] == ti.dag_run.conf
    assert body["dag_run"]["logical_date"] is None
    assert body["dag_run"]["run_after"].endswith("Z")
    assert body["dag_run"]["consumed_asset_events"] == []
    assert (body["max_tries"], body["task_reschedule_count"]) == (2, 0)
    assert body["variables"] == []
    assert body["connections"] == []
    assert body["upstream_map_indexes"] is None
    assert body["should_retry"] is True
    ti.refresh_from_db()
    assert (ti.state, ti.hostname, ti.unixname, ti.pid) == ("running", "vm", "root", 6771)
    assert ti.start_date.isoformat() == "2026-11-30T04:50:58.075255+00:00"


def test_run_keeps_hostname_and_unixname_as_sent_untrimmed(make_ti):
    # a no-break space is a non-empty string to pydantic (and so to the schema): not blank
    ti = make_ti(state="queued")

    response = _run(ti, {**RUN_BODY, "hostname": " vm ", "unixname": "\u00a0"})

    assert response.status_code == 200, response.content
    ti.refresh_from_db()
    assert (ti.hostname, ti.unixname) == (" vm ", "\u00a0")


def test_run_repeat_by_the_same_process_is_200_again(make_ti):
    ti = make_ti(state="queued")
    assert _run(ti).status_code == 200

    response = _run(ti)

    assert response.status_code == 200


@pytest.mark.parametrize(
    ("state", "body"),
    [
        pytest.param("running", {**RUN_BODY, "pid": 1}, id="running-other-pid"),
        pytest.param("running", {**RUN_BODY, "hostname": "other"}, id="running-other-host"),
        pytest.param("success", RUN_BODY, id="success"),
        pytest.param("failed", RUN_BODY, id="failed"),
        pytest.param("scheduled", RUN_BODY, id="scheduled"),
    ],
)
def test_run_otherwise_is_409_invalid_state(make_ti, state, body):
    ti = make_ti(state=state)
    if state == "running":
        ti.hostname, ti.unixname, ti.pid = "vm", "root", 6771
        ti.save()

    response = _run(ti, body)

    assert response.status_code == 409
    assert response["Content-Type"] == "application/json"
    detail = response.json()["detail"]
    assert (detail["reason"], detail["previous_state"]) == ("invalid_state", state)


def test_run_unknown_ti_is_404(runner):
    ti_id = "0195e0b8-0000-7000-8000-00000000abcd"

    response = runner(ti_id).patch(
        f"/execution/task-instances/{ti_id}/run", RUN_BODY, format="json"
    )

    assert response.status_code == 404


@pytest.mark.parametrize(
    "body",
    [
        pytest.param({**RUN_BODY, "start_date": "2026-11-30T04:50:58"}, id="naive"),
        pytest.param({**RUN_BODY, "state": "queued"}, id="state"),
        pytest.param({**RUN_BODY, "extra": 1}, id="unknown-key"),
        pytest.param({"state": "running"}, id="missing"),
        pytest.param({**RUN_BODY, "pid": 2**31}, id="pid-beyond-the-column"),
        pytest.param({**RUN_BODY, "pid": -1}, id="pid-negative"),
    ],
)
def test_run_invalid_body_is_422(make_ti, body):
    ti = make_ti(state="queued")

    assert _run(ti, body).status_code == 422


def test_run_from_restarting_should_retry_even_without_retries_left(make_ti):
    # a TI cleared while running (restarting) is always eligible for a retry, as in Airflow
    ti = make_ti(state="restarting", max_tries=0)

    response = _run(ti)

    assert response.status_code == 200, response.content
    assert response.json()["should_retry"] is True


def test_run_from_queued_without_retries_should_not_retry(make_ti):
    ti = make_ti(state="queued", max_tries=0, try_number=0)

    response = _run(ti)

    assert response.json()["should_retry"] is False


def test_run_context_lists_consumed_asset_events(make_ti):
    # given an asset-triggered run that consumed an event emitted through an alias
    dag = DagFactory(dag_id="consumer")
    run = DagRun.objects.create(
        dag=dag, run_id="asset_triggered__x", run_type="asset_triggered", logical_date=None
    )
    event = AssetEventFactory(asset=AssetFactory(name="a", uri="s3://a"), extra={"k": 1})
    event.source_aliases.add(AssetAliasFactory(name="al"))
    DagRunAssetEvent.objects.create(dag_run=run, event=event)
    ti = make_ti(dag_id="consumer", state="queued", dag_run=run)

    response = _run(ti)

    consumed = response.json()["dag_run"]["consumed_asset_events"]
    assert consumed == [
        {
            "asset": {"name": "a", "uri": "s3://a", "extra": {}},
            "extra": {"k": 1},
            "source_task_id": "task",
            "source_dag_id": "dag",
            "source_run_id": "run",
            "source_map_index": -1,
            "source_aliases": [{"name": "al"}],
            "timestamp": consumed[0]["timestamp"],
            "partition_key": None,
        }
    ]
    assert consumed[0]["timestamp"].endswith("Z")


def test_run_context_names_a_deleted_asset_empty(make_ti):
    # given a consumed event whose asset was deleted since (events survive their asset)
    dag = DagFactory(dag_id="consumer")
    run = DagRun.objects.create(dag=dag, run_id="asset_triggered__x", run_type="asset_triggered")
    event = AssetEventFactory(asset=AssetFactory(name="gone", uri="s3://gone"), partition_key="p")
    DagRunAssetEvent.objects.create(dag_run=run, event=event)
    Asset.objects.filter(name="gone").delete()
    ti = make_ti(dag_id="consumer", state="queued", dag_run=run)

    response = _run(ti)

    # then the client still gets the object its model requires
    [consumed] = response.json()["dag_run"]["consumed_asset_events"]
    assert consumed["asset"] == {"name": "", "uri": "", "extra": {}}
    assert (consumed["partition_key"], consumed["source_aliases"]) == ("p", [])


def test_run_query_count_is_flat_in_the_consumed_events(make_ti, django_assert_num_queries):
    dag = DagFactory(dag_id="consumer")
    for count in (1, 20):
        # given a run that consumed events, each emitted through two aliases
        run = DagRun.objects.create(dag=dag, run_id=f"asset_triggered__{count}")
        for _ in range(count):
            event = AssetEventFactory()
            event.source_aliases.add(AssetAliasFactory(), AssetAliasFactory())
            DagRunAssetEvent.objects.create(dag_run=run, event=event)
        ti = make_ti(dag_id="consumer", state="queued", dag_run=run)

        # when / then: SAVEPOINT, SELECT … FOR UPDATE of the TI (its run joined), UPDATE,
        # the queued run's UPDATE to running, RELEASE; the consumed events with their assets;
        # their source aliases
        with django_assert_num_queries(7):
            response = _run(ti)
        assert len(response.json()["dag_run"]["consumed_asset_events"]) == count


# --- heartbeat ---------------------------------------------------------------------------------


def _heartbeat(ti, body=None):
    body = body or {"hostname": ti.hostname, "pid": ti.pid}
    return client_for(ti).put(f"/execution/task-instances/{ti.pk}/heartbeat", body, format="json")


def test_heartbeat_is_204_and_recorded(make_ti):
    ti = make_ti()
    before = timezone.now()

    response = _heartbeat(ti)

    assert response.status_code == 204
    assert response.content == b""
    ti.refresh_from_db()
    assert ti.last_heartbeat_at >= before


def test_heartbeat_from_elsewhere_is_409_running_elsewhere(make_ti):
    ti = make_ti()

    response = _heartbeat(ti, {"hostname": "other", "pid": 1})

    assert response.status_code == 409
    assert response.json()["detail"] == {
        "reason": "running_elsewhere",
        "message": "TI is already running elsewhere",
        "current_hostname": "worker-1",
        "current_pid": 4242,
    }


def test_heartbeat_when_not_running_is_409_not_running(make_ti):
    ti = make_ti()
    TaskInstance.objects.filter(pk=ti.pk).update(state="success")

    response = _heartbeat(ti)

    assert response.status_code == 409
    detail = response.json()["detail"]
    assert (detail["reason"], detail["current_state"]) == ("not_running", "success")


def test_heartbeat_unknown_ti_is_404(runner):
    ti_id = "0195e0b8-0000-7000-8000-00000000beef"

    response = runner(ti_id).put(
        f"/execution/task-instances/{ti_id}/heartbeat", wire_sample("heartbeat"), format="json"
    )

    assert response.status_code == 404


# --- rtif and validate-inlets-and-outlets -------------------------------------------------------


def test_rtif_is_stored_and_answers_201(make_ti):
    ti = make_ti()

    response = client_for(ti).put(
        f"/execution/task-instances/{ti.pk}/rtif", wire_sample("rtif"), format="json"
    )

    assert response.status_code == 201
    assert response.json() == {"message": "Rendered task instance fields successfully set"}
    ti.refresh_from_db()
    assert ti.rendered_fields == wire_sample("rtif")


def test_rtif_must_be_an_object(make_ti):
    ti = make_ti()

    response = client_for(ti).put(f"/execution/task-instances/{ti.pk}/rtif", [1], format="json")

    assert response.status_code == 422


def test_rtif_with_a_nul_character_is_422_not_a_database_error(make_ti):
    # PostgreSQL's jsonb cannot store U+0000
    ti = make_ti()

    response = client_for(ti).put(
        f"/execution/task-instances/{ti.pk}/rtif", {"cmd": "a\x00b"}, format="json"
    )

    assert response.status_code == 422, response.content
    assert response.json()["detail"][0]["loc"] == ["body", "cmd"]


def test_validate_inlets_and_outlets_lists_inactive_declared_assets(
    declare, make_ti, django_assert_num_queries
):
    declare(
        """
dags:
  - dag_id: producer
    tasks:
      - task_id: produce
        outlets: [{asset: {name: "out", uri: "s3://b/out"}}, {alias: al}]
        inlets: [{asset: {name: "in", uri: "s3://b/in"}}]
"""
    )
    ti = make_ti()
    url = f"/execution/task-instances/{ti.pk}/validate-inlets-and-outlets"
    assert client_for(ti).get(url).json() == wire_sample("validate_inlets_and_outlets_response")

    # when the assets stop being active (e.g. the declaring DAG became stale)
    from assets_app.models import AssetActive

    AssetActive.objects.filter(name="out").delete()
    with django_assert_num_queries(2):  # the TI's dag and task, the inactive assets
        response = client_for(ti).get(url)

    assert response.status_code == 200
    assert response.json() == {
        "inactive_assets": [{"name": "out", "uri": "s3://b/out", "type": "Asset"}]
    }
    assert not AssetEvent.objects.exists()


def test_validate_inlets_and_outlets_unknown_ti_is_404(runner):
    ti_id = "0195e0b8-0000-7000-8000-00000000cafe"

    response = runner(ti_id).get(f"/execution/task-instances/{ti_id}/validate-inlets-and-outlets")

    assert response.status_code == 404
    assert response.json()["detail"]["reason"] == "not_found"


def test_run_context_carries_the_runs_conf_as_airflows_client_reads_it(make_ti):
    # given: a run triggered with a conf
    from airflow.sdk.api.datamodels._generated import TIRunContext

    ti = make_ti(state="queued")
    DagRun.objects.filter(pk=ti.dag_run_id).update(conf={"x": 5, "nested": {"a": [1, 2]}})

    # when
    response = _run(ti)

    # then: the task's dag_run.conf is the run's, as Airflow's task runner parses the answer
    assert response.status_code == 200, response.content
    context = TIRunContext.model_validate(response.json())
    assert context.dag_run.conf == {"x": 5, "nested": {"a": [1, 2]}}
