"""Issue 38: dynamic task mapping in the scheduler — a mapped task's unexpanded task instance
becomes one per map index once its upstreams are done (literals, an upstream's pushed
values, cross products, mapped task groups, second order), zero values skip it, more than
``MAX_MAP_LENGTH`` fail the upstream pushing them, and what is downstream counts every map
index (or, in a mapped task group, its own)."""

from __future__ import annotations

import json

import pytest
import yaml
from django.db import connection
from django.test.utils import CaptureQueriesContext

from assets_app.mapping import MappingSpecError, length_evaluate, mapped_check
from assets_app.models import DagRun, TaskInstance, TaskMap
from assets_app.services.dags.declare import dags_declare
from assets_app.services.dags.manifest import manifest_parse
from assets_app.services.runs.advance import task_instances_advance
from assets_app.services.runs.dag_runs import dag_run_trigger
from assets_app.services.runs.mapping import Expansion, task_instances_expand
from tests.assets_app.runs.test_task_flow import finish
from tests.executionapi.conftest import client_for, wire_sample

pytestmark = pytest.mark.django_db

END = "2026-12-02T00:00:00Z"


def declare(text: str) -> None:
    dags_declare(manifest=manifest_parse(yaml.safe_load(text)), fileloc="mapping.yaml")


def states(run: DagRun) -> dict[str, str | None]:
    """``task_id`` or ``task_id[map_index]`` → state."""
    return {
        (task_id if index < 0 else f"{task_id}[{index}]"): state
        for task_id, index, state in TaskInstance.objects.filter(dag_run=run).values_list(
            "task_id", "map_index", "state"
        )
    }


LITERAL = """
dags:
  - dag_id: example_dynamic_task_mapping
    tags: [mapping, example]
    tasks:
      - {task_id: add_one, mapped: {length: 3, group: null}}
      - {task_id: sum_it, upstream: [add_one]}
"""


def test_a_literal_expansion_makes_one_task_instance_per_element_and_the_reduce_waits_for_all():
    declare(LITERAL)
    run = dag_run_trigger(dag_id="example_dynamic_task_mapping")
    # the mapped task waits unexpanded until the scheduler decides it
    assert states(run) == {"add_one": None, "sum_it": None}

    result = task_instances_advance(dag_run_ids=[run.pk])

    assert result.scheduled == 3
    assert states(run) == {
        "add_one[0]": "scheduled",
        "add_one[1]": "scheduled",
        "add_one[2]": "scheduled",
        "sum_it": None,
    }
    for index in range(3):
        finish(run, "add_one", "success", map_index=index, returns=index + 1)
        expected = "scheduled" if index == 2 else None
        assert states(run)["sum_it"] == expected
    finish(run, "sum_it", "success", returns=6)
    run.refresh_from_db()
    assert run.state == "success"


XCOM = """
dags:
  - dag_id: etl_partitions_mapped_over_xcom
    tags: [mapping]
    tasks:
      - {task_id: list_partitions}
      - task_id: load_partition
        upstream: [list_partitions]
        mapped: {length: {xcom: list_partitions}, group: null}
      - {task_id: report, upstream: [load_partition], trigger_rule: all_done}
      - {task_id: publish, upstream: [load_partition]}
"""


def test_an_expansion_over_an_upstream_xcom_with_one_failing_index():
    # given a mapped task over the 5 partitions its upstream returns
    declare(XCOM)
    run = dag_run_trigger(dag_id="etl_partitions_mapped_over_xcom")
    finish(run, "list_partitions", "success", returns=list("abcde"), mapped_length=5)
    assert TaskMap.objects.get(dag_run=run, task_id="list_partitions").length == 5
    assert [states(run)[f"load_partition[{i}]"] for i in range(5)] == ["scheduled"] * 5

    # when one map index fails and the others succeed
    for index in range(5):
        finish(run, "load_partition", "failed" if index == 3 else "success", map_index=index)

    # then all_done runs once every index is done; all_success is upstream_failed, as Airflow
    assert states(run)["report"] == "scheduled"
    assert states(run)["publish"] == "upstream_failed"


def test_an_empty_expansion_skips_the_mapped_task_and_an_unpushed_one_fails_it_upstream():
    declare(XCOM)
    empty = dag_run_trigger(dag_id="etl_partitions_mapped_over_xcom", run_id="empty")
    finish(empty, "list_partitions", "success", returns=[], mapped_length=0)
    assert states(empty)["load_partition"] == "skipped"
    assert states(empty)["publish"] == "skipped"  # all_success over a skipped upstream
    assert states(empty)["report"] == "scheduled"  # all_done

    unpushed = dag_run_trigger(dag_id="etl_partitions_mapped_over_xcom", run_id="unpushed")
    finish(unpushed, "list_partitions", "success")  # nothing pushed for the mapped task
    assert states(unpushed)["load_partition"] == "upstream_failed"


def test_a_push_beyond_max_map_length_is_refused_with_airflows_400(settings):
    settings.MAX_MAP_LENGTH = 4
    declare(XCOM)
    run = dag_run_trigger(dag_id="etl_partitions_mapped_over_xcom")
    ti = TaskInstance.objects.get(dag_run=run, task_id="list_partitions")
    TaskInstance.objects.filter(pk=ti.pk).update(state="queued")
    client = client_for(ti)
    client.patch(f"/execution/task-instances/{ti.pk}/run", wire_sample("run_start"), format="json")

    response = client.post(
        f"/execution/xcoms/{run.dag_id}/{run.run_id}/list_partitions/return_value?mapped_length=5",
        data=json.dumps(list("abcde")),
        content_type="application/json",
    )

    assert response.status_code == 400
    assert response.json() == {
        "detail": {
            "reason": "unmappable_return_value_length",
            "message": "pushed value is too large to map as a downstream's dependency",
            "length": 5,
            "limit": 4,
        }
    }
    assert not TaskMap.objects.exists()
    assert not run.xcoms.exists()  # nothing of the refused push is stored


GROUP_AND_SECOND_ORDER = """
dags:
  - dag_id: mapped_group_and_second_order
    tags: [mapping]
    tasks:
      - {task_id: get_nums}
      - task_id: times_2
        upstream: [get_nums]
        mapped: {length: {xcom: get_nums}, group: null}
      - task_id: add_10
        upstream: [times_2]
        mapped: {length: {xcom: times_2}, group: null}
      - {task_id: op.add_1, mapped: {length: {product: [2, 1]}, group: op}}
      - {task_id: op.mul_2, upstream: [op.add_1], mapped: {length: 2, group: op}}
      - {task_id: after_group, upstream: [op.mul_2]}
"""


def test_a_mapped_group_runs_per_map_index_and_second_order_maps_over_every_index():
    declare(GROUP_AND_SECOND_ORDER)
    run = dag_run_trigger(dag_id="mapped_group_and_second_order")
    task_instances_advance(dag_run_ids=[run.pk])
    # the group's tasks expand at once; mul_2[i] waits for add_1[i] only
    assert {k: v for k, v in states(run).items() if k.startswith("op.")} == {
        "op.add_1[0]": "scheduled",
        "op.add_1[1]": "scheduled",
        "op.mul_2[0]": None,
        "op.mul_2[1]": None,
    }
    finish(run, "op.add_1", "success", map_index=1, returns=3)
    assert states(run)["op.mul_2[1]"] == "scheduled"
    assert states(run)["op.mul_2[0]"] is None
    finish(run, "op.add_1", "failed", map_index=0)
    assert states(run)["op.mul_2[0]"] == "upstream_failed"
    finish(run, "op.mul_2", "success", map_index=1, returns=6)
    assert states(run)["after_group"] == "upstream_failed"

    # second order: add_10 maps over every map index of times_2 that returned a value
    finish(run, "get_nums", "success", returns=[1, 2, 3], mapped_length=3)
    for index in range(3):
        assert states(run)["add_10"] is None  # waits for every index of times_2
        finish(run, "times_2", "success", map_index=index, returns=2 * (index + 1))
    assert [states(run).get(f"add_10[{i}]") for i in range(4)] == ["scheduled"] * 3 + [None]


def test_expanding_a_thousand_map_indexes_costs_a_constant_number_of_statements():
    declare(LITERAL.replace("length: 3", "length: 1000"))
    run = dag_run_trigger(dag_id="example_dynamic_task_mapping")
    with CaptureQueriesContext(connection) as queries:
        task_instances_advance(dag_run_ids=[run.pk])
    assert TaskInstance.objects.filter(dag_run=run, task_id="add_one").count() == 1000
    assert sorted(
        TaskInstance.objects.filter(dag_run=run, task_id="add_one").values_list(
            "map_index", flat=True
        )
    ) == list(range(1000))
    # pinned: 2 reads, 3 for the lengths, 4 for the expansion (with its savepoint), 1 update
    # per new state, and the settle's checks; the same for 10 map indexes
    small = dag_run_trigger(dag_id="example_dynamic_task_mapping", run_id="small")
    declare(LITERAL.replace("length: 3", "length: 10"))
    with CaptureQueriesContext(connection) as small_queries:
        task_instances_advance(dag_run_ids=[small.pk])
    assert len(queries) == len(small_queries)
    assert len(queries) <= 14, [q["sql"][:120] for q in queries]


def test_an_expansion_wider_than_max_map_length_fails_the_mapped_task_saying_why(settings):
    settings.MAX_MAP_LENGTH = 4
    declare(LITERAL.replace("length: 3", "length: 5"))
    run = dag_run_trigger(dag_id="example_dynamic_task_mapping")

    task_instances_advance(dag_run_ids=[run.pk])

    wide = TaskInstance.objects.get(dag_run=run, task_id="add_one")
    assert (wide.map_index, wide.state) == (-1, "failed")
    assert wide.failure_reason == "its expansion has more than MAX_MAP_LENGTH (4) map indexes"
    assert states(run)["sum_it"] == "upstream_failed"


def test_two_processes_expanding_one_task_leave_one_set_of_map_indexes():
    declare(LITERAL)
    run = dag_run_trigger(dag_id="example_dynamic_task_mapping")
    placeholder = TaskInstance.objects.get(dag_run=run, task_id="add_one")
    import uuid

    first = Expansion(run.pk, placeholder.pk, [uuid.uuid4(), uuid.uuid4()])
    second = Expansion(run.pk, placeholder.pk, [uuid.uuid4()])

    assert task_instances_expand([first]) == []
    assert task_instances_expand([second]) == [second]  # the loser writes nothing
    assert sorted(
        TaskInstance.objects.filter(dag_run=run, task_id="add_one").values_list(
            "map_index", flat=True
        )
    ) == [0, 1, 2]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"length": -1}, "mapped.length: a literal length cannot be negative"),
        ({"length": {"xcom": ""}}, "mapped.length.xcom: expected the task id it maps over"),
        ({"length": {"zip": []}}, "mapped.length.zip: expected a non-empty list"),
        ({"length": {"sum": [1]}}, "mapped.length: unknown kind 'sum'"),
        ({"length": 2, "group": 3}, "mapped.group: expected a task group id or null"),
        ({"lenght": 2}, 'mapped: expected {"length"'),
        ({"length": True}, "mapped.length: expected a length expression, not a boolean"),
    ],
)
def test_a_malformed_mapping_is_refused_naming_the_place(spec, message):
    with pytest.raises(MappingSpecError) as refused:
        mapped_check(spec, "mapped")
    assert message in str(refused.value)


def test_a_manifest_mapping_over_a_task_that_is_not_upstream_is_refused():
    from assets_app.exceptions import ManifestError

    with pytest.raises(ManifestError, match="maps over 'elsewhere', which is not one of"):
        declare(XCOM.replace("{xcom: list_partitions}", "{xcom: elsewhere}"))


def test_lengths_of_zip_concat_and_cross_products():
    pushed = {"a": 3, "b": 5}.get
    assert length_evaluate({"zip": [{"xcom": "a"}, {"xcom": "b"}], "fill": False}, pushed) == 3
    assert length_evaluate({"zip": [{"xcom": "a"}, {"xcom": "b"}], "fill": True}, pushed) == 5
    assert length_evaluate({"concat": [{"xcom": "a"}, 2]}, pushed) == 5
    assert length_evaluate({"product": [{"xcom": "a"}, {"xcom": "b"}, 2]}, pushed) == 30
    assert length_evaluate({"product": [{"xcom": "a"}, {"xcom": "missing"}]}, pushed) is None


def test_a_mapped_task_instance_stores_its_rendered_label_and_bad_labels_are_refused():
    declare(LITERAL)
    run = dag_run_trigger(dag_id="example_dynamic_task_mapping")
    task_instances_advance(dag_run_ids=[run.pk])
    ti = TaskInstance.objects.get(dag_run=run, task_id="add_one", map_index=1)
    other = TaskInstance.objects.get(dag_run=run, task_id="add_one", map_index=2)
    client = client_for(ti)
    url = f"/execution/task-instances/{ti.pk}/rendered-map-index"

    stored = client.patch(url, data=json.dumps("table=orders"), content_type="application/json")
    empty = client.patch(url, data=json.dumps(""), content_type="application/json")
    number = client.patch(url, data=json.dumps({"x": 1}), content_type="application/json")
    too_long = client.patch(url, data=json.dumps("x" * 251), content_type="application/json")
    coerced = client.patch(url, data="0", content_type="application/json")  # not "0"
    foreign = client.patch(
        f"/execution/task-instances/{other.pk}/rendered-map-index",
        data=json.dumps("stolen"),
        content_type="application/json",
    )

    assert stored.status_code == 204, stored.content
    ti.refresh_from_db()
    assert ti.rendered_map_index == "table=orders"
    assert [r.status_code for r in (empty, number, too_long, coerced)] == [422, 422, 422, 422]
    assert number.json()["detail"][0]["loc"] == ["body"]
    assert foreign.status_code == 403  # a token is for its own task instance only
    other.refresh_from_db()
    assert other.rendered_map_index is None


def test_max_active_tis_per_dagrun_holds_across_the_map_indexes():
    declare(
        LITERAL.replace(
            "{task_id: add_one, mapped: {length: 3, group: null}}",
            "{task_id: add_one, mapped: {length: 5, group: null}, max_active_tis_per_dagrun: 2}",
        )
    )
    run = dag_run_trigger(dag_id="example_dynamic_task_mapping")
    task_instances_advance(dag_run_ids=[run.pk])
    from assets_app.services.runs.claims import task_instances_claim

    first = task_instances_claim(limit=10)
    assert sorted(ti.map_index for ti in first) == [0, 1]  # in map-index order, two at once
    assert task_instances_claim(limit=10) == []
    TaskInstance.objects.filter(pk=first[0].pk).update(state="success")
    assert [ti.map_index for ti in task_instances_claim(limit=10)] == [2]


def test_marking_one_map_index_success_runs_what_its_failure_held_back():
    """Airflow's "mark success" of one map index: the task instance takes the state, the
    upstream-failed task downstream is cleared and runs; the others are left alone."""
    from assets_app.services.runs.marking import task_instances_mark

    declare(XCOM)
    run = dag_run_trigger(dag_id="etl_partitions_mapped_over_xcom")
    finish(run, "list_partitions", "success", returns=list("abc"), mapped_length=3)
    for index in range(3):
        finish(run, "load_partition", "failed" if index == 1 else "success", map_index=index)
    assert states(run)["publish"] == "upstream_failed"
    assert states(run)["report"] == "scheduled"
    before = TaskInstance.objects.get(dag_run=run, task_id="load_partition", map_index=0)

    result = task_instances_mark(
        task_instances=TaskInstance.objects.filter(
            dag_run=run, task_id="load_partition", map_index=1
        ),
        state="success",
    )

    assert [m.label for m in result.marked] == [
        f"etl_partitions_mapped_over_xcom.load_partition[1] @ {run.run_id}"
    ]
    assert [c.split(" @ ")[0] for c in result.cleared] == [
        "etl_partitions_mapped_over_xcom.publish"
    ]
    after = states(run)
    assert [after[f"load_partition[{i}]"] for i in range(3)] == ["success"] * 3
    assert after["publish"] == "scheduled"  # cleared, and its upstreams now all succeeded
    assert TaskInstance.objects.get(pk=before.pk).end_date == before.end_date  # untouched


def test_a_task_instance_cannot_be_marked_running():
    from assets_app.exceptions import InvalidInputError
    from assets_app.services.runs.marking import task_instances_mark

    declare(LITERAL)
    run = dag_run_trigger(dag_id="example_dynamic_task_mapping")
    with pytest.raises(InvalidInputError, match="can be marked success, failed, skipped"):
        task_instances_mark(
            task_instances=TaskInstance.objects.filter(dag_run=run), state="running"
        )
