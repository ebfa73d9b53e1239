"""A consumer scheduled by a name/uri ref, queued by an event on an *inactive* asset (issue #10).

An alias producer creates asset ``(dyn, s3://shared/x)`` and emits an event on it. Like
Airflow's ``AssetManager.register_asset_change``, registration queues every DAG scheduled on a
ref to that name or uri, active or not; and like Airflow's ``AssetEvaluator``, the scheduler
resolves a ref to the *active* asset with that name or uri only. So the queue row cannot meet
the condition while the asset is inactive. Airflow then keeps the row, and the registry does
the same:

* the row waits, and no run is created (it is not "consumable" yet);
* once the asset becomes active (a DAG declares it), the ref resolves to it and the waiting
  row triggers a run that consumes the event;
* when the DAG's condition is met otherwise first, its run deletes **every** queue row of the
  DAG, this one included (Airflow: ``delete(AssetDagRunQueue).where(target_dag_id == …)``),
  and the run consumes only the events of the assets the condition resolves to.
"""

from __future__ import annotations

import pytest
import yaml

from assets_app.models import AssetDagRunQueue, AssetEvent, Dag, DagRun
from assets_app.outlets import AliasOutletEvent, OutletProfile, OutletType
from assets_app.services.assets.registration import asset_changes_register
from assets_app.services.dags.declare import dags_declare
from assets_app.services.dags.manifest import manifest_parse
from assets_app.services.scheduling.scheduler import Outcome, scheduler_pass
from task_sdk.definitions import AssetUniqueKey
from tests.factories import TaskInstanceFactory

pytestmark = pytest.mark.django_db

URI = "s3://shared/x"
PRODUCERS = """
dags:
  - dag_id: alias_producer
    tasks:
      - task_id: emit
        outlets: [{alias: dynamic}]
  - dag_id: other_producer
    tasks:
      - task_id: emit
        outlets: [{asset: {name: other, uri: "s3://bucket/other"}}]
"""


def declare(consumer_schedule: dict, *, extra_dags: str = "", fileloc: str = "dags.yaml") -> None:
    manifest = yaml.safe_load(PRODUCERS + extra_dags)
    manifest["dags"].append(
        {"dag_id": "consumer", "schedule": consumer_schedule, "tasks": [{"task_id": "t"}]}
    )
    dags_declare(manifest=manifest_parse(manifest), fileloc=fileloc)


def emit_through_alias() -> int:
    """The alias producer's success: an event on the new, inactive asset (dyn, URI)."""
    ti = TaskInstanceFactory(
        dag_run__dag=Dag.objects.get(dag_id="alias_producer"), task_id="emit", state="running"
    )
    registered = asset_changes_register(
        task_instance=ti,
        task_outlets=[OutletProfile(type=OutletType.ALIAS, name="dynamic")],
        outlet_events=[
            AliasOutletEvent(
                source_alias_name="dynamic", dest_asset_key=AssetUniqueKey(name="dyn", uri=URI)
            )
        ],
    )
    (event_id,) = registered.event_ids
    return event_id


def emit_other() -> int:
    ti = TaskInstanceFactory(
        dag_run__dag=Dag.objects.get(dag_id="other_producer"), task_id="emit", state="running"
    )
    registered = asset_changes_register(
        task_instance=ti,
        task_outlets=[OutletProfile(type=OutletType.ASSET, name="other", uri="s3://bucket/other")],
        outlet_events=[],
    )
    (event_id,) = registered.event_ids
    return event_id


def queued() -> list[tuple[str, str]]:
    return sorted(
        AssetDagRunQueue.objects.filter(target_dag_id="consumer").values_list(
            "asset__name", "asset__uri"
        )
    )


@pytest.mark.parametrize("ref", [{"uri": URI}, {"name": "dyn"}], ids=["uri-ref", "name-ref"])
def test_the_row_waits_while_the_asset_is_inactive(ref):
    declare({"asset_ref": ref})
    emit_through_alias()
    assert queued() == [("dyn", URI)]  # queued like Airflow queues ref-scheduled DAGs

    for _ in range(3):
        result = scheduler_pass()
        assert result.created == []
        assert result.count(Outcome.NOT_READY) == 1

    assert queued() == [("dyn", URI)]
    assert not DagRun.objects.filter(dag_id="consumer").exists()


def test_the_row_triggers_a_run_once_the_asset_is_active():
    declare({"asset_ref": {"uri": URI}})
    event_id = emit_through_alias()
    assert scheduler_pass().created == []

    # a DAG now declares the asset: it is active, and the ref resolves to it
    declare(
        {"asset_ref": {"uri": URI}},
        extra_dags=f"""
  - dag_id: declares_dyn
    tasks:
      - task_id: reads
        inlets: [{{asset: {{name: dyn, uri: "{URI}"}}}}]
""",
    )
    (run,) = scheduler_pass().created

    assert (run.dag_id, run.event_ids) == ("consumer", (event_id,))
    assert queued() == []


def test_a_run_triggered_otherwise_drops_the_row_and_consumes_only_resolved_events():
    # the consumer runs on either the ref or another asset
    declare(
        {
            "any": [
                {"asset_ref": {"uri": URI}},
                {"asset": {"name": "other", "uri": "s3://bucket/other"}},
            ]
        }
    )
    dyn_event = emit_through_alias()
    assert scheduler_pass().created == []
    other_event = emit_other()
    assert queued() == [("dyn", URI), ("other", "s3://bucket/other")]

    (run,) = scheduler_pass().created

    assert run.event_ids == (other_event,)  # the inactive asset's event is not consumed …
    assert queued() == []  # … and its row went with the run, as in Airflow
    assert AssetEvent.objects.filter(pk=dyn_event).exists()
    assert scheduler_pass().created == []
