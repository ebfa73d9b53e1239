"""assets_app.services.dags.manifest: reading and validating a manifest into declarations.

No test here may touch the database (no ``django_db`` mark: a query would fail it).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from assets_app.conditions import AllOf, AnyOf, condition_expression
from assets_app.exceptions import ManifestError
from assets_app.services.dags.manifest import (
    AliasDecl,
    AssetDecl,
    DagDecl,
    TaskDecl,
    manifest_load,
    manifest_parse,
)
from task_sdk.definitions import AssetAliasUniqueKey, AssetNameRef, AssetUniqueKey, AssetUriRef
from tests.live_server import REPO

EXAMPLE = REPO / "examples" / "dags.yaml"
MY_TASK = AssetUniqueKey(name="s3://bucket/my-task", uri="s3://bucket/my-task")


#: Nested all/any schedules with references, and how they are stored (``test_dags.py`` stores it).
NESTED_MANIFEST = {
    "dags": [
        {
            "dag_id": "consumer",
            "schedule": {
                "any": [
                    [{"asset": {"name": "a", "uri": "s3://b/a"}}, {"alias": "al"}],
                    {"all": [{"asset_ref": {"name": "n"}}, {"asset_ref": {"uri": "s3://b/u/"}}]},
                ]
            },
        },
        {"dag_id": "listed", "schedule": [{"asset": {"uri": "s3://b/c"}}]},
    ]
}
NESTED_EXPRESSIONS = {
    "consumer": {
        "any": [
            {"all": [{"asset": {"name": "a", "uri": "s3://b/a"}}, {"alias": {"name": "al"}}]},
            {"all": [{"asset_ref": {"name": "n"}}, {"asset_ref": {"uri": "s3://b/u"}}]},
        ]
    },
    "listed": {"all": [{"asset": {"name": "s3://b/c", "uri": "s3://b/c"}}]},
}


def one_dag(**dag: object) -> dict:
    return {"dags": [{"dag_id": "d", **dag}]}


def test_example_manifest_parses_into_declarations():
    # when
    manifest = manifest_load(EXAMPLE)

    # then
    alias = AssetAliasUniqueKey(name="example-alias")
    tasks = EXAMPLE.parent / "tasks"
    producers, consumers = tasks / "seed_producers.py", tasks / "seed_consumers.py"
    assert manifest.dags == (
        DagDecl(
            dag_id="asset_s3_bucket_producer",
            tasks=(
                TaskDecl(
                    task_id="produce_asset_events",
                    outlets=(MY_TASK,),
                    callable=f"{producers}:produce_asset_events",
                ),
            ),
        ),
        DagDecl(
            dag_id="asset_s3_bucket_consumer",
            tasks=(
                TaskDecl(
                    task_id="consume_asset_events",
                    inlets=(MY_TASK,),
                    callable=f"{consumers}:consume_asset_events",
                ),
            ),
            schedule=MY_TASK,
        ),
        DagDecl(
            dag_id="asset_alias_example_alias_producer",
            tasks=(
                TaskDecl(
                    task_id="produce_asset_events_through_asset_alias",
                    outlets=(alias,),
                    callable=f"{producers}:produce_asset_events_through_asset_alias",
                ),
            ),
        ),
        DagDecl(
            dag_id="asset_alias_example_alias_consumer",
            tasks=(
                TaskDecl(
                    task_id="consume_asset_alias_events",
                    inlets=(alias,),
                    callable=f"{consumers}:consume_asset_alias_events",
                ),
            ),
            schedule=alias,
        ),
    )
    assert manifest.assets == {MY_TASK: AssetDecl(key=MY_TASK)}
    assert manifest.aliases == {"example-alias": AliasDecl(name="example-alias")}
    assert manifest.dags[1].task_ids == ["consume_asset_events"]


def test_all_of_any_of_nested_and_refs_parse_into_a_condition_tree():
    # when
    consumer, listed = manifest_parse(NESTED_MANIFEST).dags

    # then
    a = AssetUniqueKey(name="a", uri="s3://b/a")
    assert consumer.schedule == AnyOf(
        (
            AllOf((a, AssetAliasUniqueKey(name="al"))),
            AllOf((AssetNameRef("n"), AssetUriRef("s3://b/u"))),  # the uri ref normalized
        )
    )
    # and its stored form, as the scheduler reads it
    assert listed.schedule is not None
    assert {
        "consumer": condition_expression(consumer.schedule),
        "listed": condition_expression(listed.schedule),
    } == NESTED_EXPRESSIONS


def test_asset_uris_are_normalized_like_the_task_sdk():
    # when
    manifest = manifest_parse(
        one_dag(tasks=[{"task_id": "t", "outlets": [{"asset": {"uri": "S3://Bucket/x/?b=2&a=1"}}]}])
    )

    # then a uri given alone is copied to the name before it is normalized
    assert list(manifest.assets) == [
        AssetUniqueKey(name="S3://Bucket/x/?b=2&a=1", uri="s3://Bucket/x?a=1&b=2")
    ]


def test_group_and_extra_are_merged_from_whichever_declaration_gives_them():
    # given the same asset three times: with a group, bare, with an extra
    key = AssetUniqueKey(name="a", uri="s3://b/a")
    document = one_dag(
        schedule={"asset": {"name": "a", "uri": "s3://b/a", "group": "g"}},
        tasks=[
            {
                "task_id": "t",
                "outlets": [{"asset": {"name": "a", "uri": "s3://b/a"}}],
                "inlets": [{"asset": {"name": "a", "uri": "s3://b/a", "extra": {"v": 1}}}],
            }
        ],
    )

    # when
    manifest = manifest_parse(document)

    # then
    assert manifest.assets == {key: AssetDecl(key=key, group="g", extra={"v": 1})}


def test_assets_and_aliases_are_in_manifest_order():
    # given: per DAG its schedule first, then its tasks' outlets and inlets
    document = {
        "dags": [
            {
                "dag_id": "d1",
                "tasks": [
                    {"task_id": "t", "outlets": [{"asset": {"name": "out"}}, {"alias": "x"}]}
                ],
                "schedule": [{"asset": {"name": "sched"}}, {"alias": "y"}],
            },
            {"dag_id": "d2", "tasks": [{"task_id": "t", "inlets": [{"asset": {"name": "in"}}]}]},
        ]
    }

    # when
    manifest = manifest_parse(document)

    # then
    assert [key.name for key in manifest.assets] == ["sched", "out", "in"]
    assert list(manifest.aliases) == ["y", "x"]


def test_an_alias_takes_the_last_group_given():
    manifest = manifest_parse(
        one_dag(
            schedule={"any": [{"alias": {"name": "al", "group": "g1"}}, {"alias": "al"}]},
            tasks=[{"task_id": "t", "outlets": [{"alias": {"name": "al", "group": "g2"}}]}],
        )
    )
    assert manifest.aliases == {"al": AliasDecl(name="al", group="g2")}


def test_references_and_aliases_declare_no_asset():
    manifest = manifest_parse(
        one_dag(tasks=[{"task_id": "t", "outlets": [{"asset_ref": {"name": "n"}}, {"alias": "a"}]}])
    )
    assert manifest.assets == {}
    assert manifest.dags[0].tasks[0].outlets == (AssetNameRef("n"), AssetAliasUniqueKey("a"))


def test_json_manifest_is_read_as_json(tmp_path):
    # given
    path = tmp_path / "dags.json"
    path.write_text(
        json.dumps(one_dag(tasks=[{"task_id": "t", "inlets": [{"alias": {"name": "a"}}]}]))
    )

    # when
    manifest = manifest_load(path)

    # then
    assert [dag.dag_id for dag in manifest.dags] == ["d"]
    assert list(manifest.aliases) == ["a"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param("dags: [", "invalid YAML", id="yaml-syntax"),
        pytest.param("[]", "expected a mapping", id="not-a-mapping"),
        pytest.param("dags: []\nextra: 1", "unknown key(s) extra", id="unknown-top-key"),
        pytest.param("dags:\n  - dag_id: 'bad id'", "may only contain", id="dag-id-chars"),
        pytest.param(f"dags:\n  - dag_id: {'d' * 251}", "longer than 250", id="dag-id-length"),
        pytest.param(
            "dags:\n  - {dag_id: d}\n  - {dag_id: d}", "duplicate dag_id(s) d", id="dup-dag"
        ),
        pytest.param(
            "dags:\n  - dag_id: d\n    tasks: [{task_id: t}, {task_id: t}]",
            "duplicate task_id(s) t",
            id="dup-task",
        ),
        pytest.param(
            "dags:\n  - {dag_id: d, is_paused: 'no'}",
            "is_paused: expected true or false",
            id="paused",
        ),
        pytest.param(
            "dags:\n  - {dag_id: d, is_paused_upon_creation: 1}",
            "dags.yaml: DAG 'd', is_paused_upon_creation: expected true or false",
            id="paused-upon-creation",
        ),
        pytest.param(
            "dags:\n  - {dag_id: d, schedule: {asset: {}}}",
            "dags.yaml: DAG 'd', schedule.asset: an asset needs a name or a uri",
            id="empty-asset",
        ),
        pytest.param(
            f"dags:\n  - {{dag_id: d, schedule: {{asset: {{name: {'n' * 1501}}}}}}}",
            "cannot exceed 1500",
            id="name-length",
        ),
        pytest.param(
            "dags:\n  - {dag_id: d, schedule: [1]}",
            "dags.yaml: DAG 'd', schedule[0]: expected an asset condition",
            id="schedule-of-a-number",
        ),
        pytest.param(
            "dags:\n  - {dag_id: d, schedule: {cron: '@daily'}}",
            "dags.yaml: DAG 'd', schedule: expected an asset condition ({asset: ...}",
            id="neither-condition-nor-time",
        ),
        pytest.param(
            "dags:\n  - {dag_id: d, schedule: '61 * * * *'}",
            "dags.yaml: DAG 'd', schedule: '61 * * * *' is not a valid cron expression",
            id="bad-cron",
        ),
        pytest.param(
            "dags:\n  - {dag_id: d, schedule: '@fortnightly'}",
            "dags.yaml: DAG 'd', schedule: unknown preset '@fortnightly'",
            id="unknown-preset",
        ),
        pytest.param(
            "dags:\n  - {dag_id: d, schedule: {timedelta: -5}}",
            "dags.yaml: DAG 'd', schedule: -5: a schedule's timedelta must be positive",
            id="negative-timedelta",
        ),
        pytest.param(
            "dags:\n  - {dag_id: d, schedule: '@daily', timezone: Mars/Olympus}",
            "dags.yaml: DAG 'd', schedule: unknown timezone 'Mars/Olympus'",
            id="unknown-timezone",
        ),
        pytest.param(
            "dags:\n  - {dag_id: d, schedule: {asset_or_time: {assets: {asset: {name: a}}}}}",
            "dags.yaml: DAG 'd', schedule.asset_or_time: missing required key(s) time",
            id="asset-or-time-without-time",
        ),
        pytest.param(
            "dags:\n  - dag_id: d\n    tasks: [{task_id: a, upstream: [b]}]",
            "dags.yaml: DAG 'd', task 'a', upstream: task 'a' depends on 'b', which the DAG "
            "does not declare",
            id="unknown-upstream",
        ),
        pytest.param(
            "dags:\n  - dag_id: d\n    tasks: [{task_id: a, upstream: [a]}]",
            "dags.yaml: DAG 'd', task 'a', upstream: task 'a' depends on itself",
            id="self-upstream",
        ),
        pytest.param(
            "dags:\n  - dag_id: d\n    tasks:\n"
            "      - {task_id: a, upstream: [c]}\n"
            "      - {task_id: b, upstream: [a]}\n"
            "      - {task_id: c, upstream: [b]}",
            "is in a cycle: ",
            id="cycle",
        ),
        pytest.param(
            "dags:\n  - dag_id: d\n    tasks: [{task_id: a, trigger_rule: sometimes}]",
            "dags.yaml: DAG 'd', task 'a', trigger_rule: unknown trigger rule 'sometimes'; one "
            "of all_success",
            id="unknown-trigger-rule",
        ),
        pytest.param(
            "dags:\n  - {dag_id: d, max_active_runs: 0}",
            "dags.yaml: DAG 'd', max_active_runs: expected a whole number from 1 to 100000",
            id="max-active-runs-zero",
        ),
        pytest.param(
            "dags:\n  - {dag_id: d, start_date: yesterday}",
            "dags.yaml: DAG 'd', start_date: 'yesterday' is not an ISO 8601 date-time",
            id="bad-start-date",
        ),
        pytest.param(
            "dags:\n  - {dag_id: d, start_date: 2026-02-01, end_date: 2026-01-01}",
            "dags.yaml: DAG 'd', end_date: 2026-01-01 00:00:00+00:00 is before start_date",
            id="end-before-start",
        ),
        pytest.param(
            "dags:\n  - {dag_id: d, schedule: {asset_ref: {name: n, uri: u}}}",
            "exactly one of name or uri",
            id="ref-both",
        ),
        pytest.param(
            "dags:\n  - {dag_id: d, tasks: [{task_id: t, outlets: [{asset: {name: a, extra: []}}]}]}",  # noqa: E501
            "extra must be a mapping",
            id="extra-list",
        ),
        pytest.param(
            "dags:\n  - {dag_id: d, tasks: [{task_id: t, outlets: [{dataset: x}]}]}",
            "dags.yaml: DAG 'd', task 't', outlets[0]: expected one of",
            id="unknown-outlet",
        ),
        pytest.param(
            "dags:\n  - {dag_id: d, schedule: {asset: {uri: 'airflow://x'}}}",
            "reserved",
            id="airflow-scheme",
        ),
        pytest.param(
            "dags:\n  - {dag_id: d, tasks: [{task_id: t, retries: -1}]}",
            "dags.yaml: DAG 'd', task 't', retries: expected a whole number",
            id="retries-negative",
        ),
        pytest.param(
            "dags:\n  - {dag_id: d, tasks: [{task_id: t, retries: true}]}",
            "retries: expected a whole number",
            id="retries-bool",
        ),
        pytest.param(
            "dags:\n  - {dag_id: d, tasks: [{task_id: t, retry_delay: '5m'}]}",
            "retry_delay: expected seconds",
            id="retry-delay-string",
        ),
        pytest.param(
            "dags:\n  - {dag_id: d, tasks: [{task_id: t, callable: 'tasks.py'}]}",
            "callable: expected 'path/to/file.py:function'",
            id="callable-no-function",
        ),
        pytest.param(
            "dags:\n  - {dag_id: d, tasks: [{task_id: t, callable: 'tasks.py:1x'}]}",
            "is not a function name",
            id="callable-bad-function",
        ),
        pytest.param(
            "dags:\n  - {dag_id: d, tasks: [{task_id: t, callable: 'a b/c:f'}]}",
            "neither a .py file nor a module path",
            id="callable-bad-target",
        ),
        pytest.param(
            "dags:\n  - {dag_id: d, airflow_dag_file: dags.txt}",
            "airflow_dag_file: expected the path of a .py file",
            id="airflow-dag-file",
        ),
        pytest.param(
            "dags:\n  - {dag_id: d, airflow_dags_folder: dags}",
            "dags.yaml: DAG 'd', airflow_dags_folder: needs an airflow_dag_file",
            id="dags-folder-without-file",
        ),
        pytest.param(
            "dags:\n  - {dag_id: d, airflow_dag_file: a/d.py, airflow_dags_folder: b}",
            "/a/d.py is not in the folder ",
            id="dags-folder-not-holding-the-file",
        ),
        pytest.param(
            "dags:\n  - {dag_id: d, airflow_dag_file: a/d.py, airflow_dags_folder: [a]}",
            "airflow_dags_folder: expected the path of a folder",
            id="dags-folder-not-a-path",
        ),
        pytest.param(
            "dags:\n  - dag_id: d\n    tasks:\n      - task_id: t\n        outlets:\n"
            "          - {asset: {name: a, extra: {v: 1}}}\n"
            "          - {asset: {name: a, extra: {v: 2}}}",
            "two different extra values",
            id="extra-conflict",
        ),
    ],
)
def test_invalid_manifest_is_rejected_with_a_precise_message(tmp_path, content, message):
    # given
    path = tmp_path / "dags.yaml"
    path.write_text(content)

    # when
    with pytest.raises(ManifestError) as error:
        manifest_load(path)

    # then
    assert message in str(error.value)


def test_task_retries_and_code_locations_parse_relative_to_the_manifest(tmp_path):
    # given
    path = tmp_path / "sub" / "dags.yaml"
    path.parent.mkdir()
    path.write_text(
        "dags:\n"
        "  - dag_id: d\n"
        "    airflow_dag_file: airflow/d.py\n"
        "    tasks:\n"
        "      - {task_id: own, callable: 'tasks/orders.py:export', retries: 2, retry_delay: 1.5}\n"
        "      - {task_id: mod, callable: 'pkg.mod:run'}\n"
        "      - {task_id: dagfile}\n"
    )

    # when
    own, mod, dagfile = manifest_load(path).dags[0].tasks

    # then
    assert (own.retries, own.retry_delay) == (2, 1.5)
    assert own.callable == f"{tmp_path}/sub/tasks/orders.py:export"
    assert own.airflow_dag_file == ""
    assert (mod.callable, mod.retries, mod.retry_delay) == ("pkg.mod:run", 0, 300.0)
    assert (dagfile.callable, dagfile.airflow_dag_file) == ("", f"{tmp_path}/sub/airflow/d.py")
    assert dagfile.airflow_dags_folder == ""  # the file's own folder


def test_a_dag_files_dags_folder_parses_relative_to_the_manifest(tmp_path):
    path = tmp_path / "dags.yaml"
    path.write_text(
        "dags:\n"
        "  - dag_id: d\n"
        "    airflow_dag_file: dags/team/d.py\n"
        "    airflow_dags_folder: dags\n"
        "    tasks: [{task_id: t}, {task_id: own, callable: 'pkg.mod:run'}]\n"
    )

    dagfile, own = manifest_load(path).dags[0].tasks

    assert (dagfile.airflow_dag_file, dagfile.airflow_dags_folder) == (
        f"{tmp_path}/dags/team/d.py",
        f"{tmp_path}/dags",
    )
    assert (own.airflow_dag_file, own.airflow_dags_folder) == ("", "")


def test_error_places_start_with_the_file_name(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("dags:\n  - {dag_id: d, tasks: [{task_id: t, outlets: [{dataset: x}]}]}")
    with pytest.raises(ManifestError, match=r"^mine\.yaml: DAG 'd', task 't', outlets\[0\]: "):
        manifest_load(path)


def test_missing_file_is_a_manifest_error(tmp_path):
    with pytest.raises(ManifestError, match="no such file"):
        manifest_load(tmp_path / "nope.yaml")


def test_dependencies_and_time_schedules_are_read(tmp_path):
    # given
    path = tmp_path / "dags.yaml"
    path.write_text(
        """
dags:
  - dag_id: nightly
    schedule: "@daily"
    timezone: Europe/Berlin
    start_date: 2026-01-01
    catchup: true
    max_active_runs: 1
    max_active_tasks: 2
    tags: [reports, reports, nightly]
    tasks:
      - {task_id: extract}
      - {task_id: transform, upstream: [extract]}
      - {task_id: load, upstream: [transform, extract], trigger_rule: all_done}
  - dag_id: either
    schedule: {asset_or_time: {assets: {asset: {name: a}}, time: {timedelta: 3600}}}
    one_run_per_event: true
"""
    )

    # when
    nightly, either = manifest_load(path).dags

    # then
    assert nightly.timetable is not None
    assert nightly.timetable.cron == "0 0 * * *"
    assert nightly.timetable.timezone == "Europe/Berlin"
    assert nightly.timetable_summary == "@daily"
    assert nightly.start_date == datetime(2026, 1, 1, tzinfo=UTC)
    assert (nightly.catchup, nightly.max_active_runs, nightly.max_active_tasks) == (True, 1, 2)
    assert nightly.tags == ("reports", "nightly")
    assert [task.upstream for task in nightly.tasks] == [(), ("extract",), ("transform", "extract")]
    assert [task.trigger_rule for task in nightly.tasks] == [
        "all_success",
        "all_success",
        "all_done",
    ]
    assert nightly.leaf_task_ids == {"load"}
    assert nightly.schedule is None
    assert either.schedule is not None
    assert either.timetable is not None
    assert either.timetable.delta == timedelta(hours=1)
    assert either.timetable_summary == "1:00:00"
    assert either.one_run_per_event is True


def test_a_refusal_names_the_file_the_dag_the_task_and_the_field():
    # given a manifest whose second DAG has a cycle, and one whose DAG has no id yet
    cycle = {
        "dags": [
            {"dag_id": "ok"},
            {
                "dag_id": "nightly",
                "tasks": [
                    {"task_id": "extract", "upstream": ["load"]},
                    {"task_id": "load", "upstream": ["extract"]},
                ],
            },
        ]
    }
    nameless = {"dags": [{"tasks": []}]}

    # when, then: the DAG and the task by their ids; a DAG without one by its position
    with pytest.raises(ManifestError) as error:
        manifest_parse(cycle, source="dags.json")
    assert error.value.message == (
        "dags.json: DAG 'nightly', task 'extract', upstream: task 'extract' is in a cycle: "
        "extract -> load -> extract"
    )
    with pytest.raises(ManifestError) as error:
        manifest_parse(nameless, source="dags.json")
    assert error.value.message.startswith("dags.json.dags[0]: missing required key(s) dag_id")
