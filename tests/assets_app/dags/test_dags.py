"""assets_app.services.dags.declare: storing a manifest's DAGs and references, and pausing DAGs.

Parsing is tested without a database in ``test_manifest.py``; the command in
``test_commands.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assets_app.exceptions import AssetConflictError
from assets_app.models import (
    Asset,
    AssetActive,
    AssetAlias,
    Dag,
    DagScheduleAssetAliasReference,
    DagScheduleAssetNameReference,
    DagScheduleAssetReference,
    DagScheduleAssetUriReference,
    DagTask,
    TaskInletAssetReference,
    TaskOutletAssetReference,
)
from assets_app.services.dags.declare import DeclareResult, dags_declare_from_file, dags_set_paused
from tests.assets_app.dags.test_manifest import NESTED_EXPRESSIONS, NESTED_MANIFEST
from tests.live_server import REPO

pytestmark = pytest.mark.django_db

EXAMPLE = REPO / "examples" / "dags.yaml"
TABLES = (
    Dag,
    Asset,
    AssetActive,
    AssetAlias,
    DagScheduleAssetReference,
    DagScheduleAssetAliasReference,
    DagScheduleAssetNameReference,
    DagScheduleAssetUriReference,
    TaskOutletAssetReference,
    TaskInletAssetReference,
)
VOLATILE = {"last_parsed_time", "created_at", "updated_at"}


def snapshot() -> dict[str, list[dict]]:
    """Every row of every table declare_dags writes, without timestamps."""
    return {
        model._meta.db_table: sorted(
            ({k: v for k, v in row.items() if k not in VOLATILE} for row in model.objects.values()),
            key=lambda row: json.dumps(row, sort_keys=True, default=str),
        )
        for model in TABLES
    }


def declare(path: Path) -> DeclareResult:
    return dags_declare_from_file(path=path)


def write(tmp_path: Path, document: dict, name: str = "dags.yaml") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(document))  # JSON is valid YAML
    return path


def active_uris() -> set[str]:
    return set(AssetActive.objects.values_list("uri", flat=True))


def test_example_manifest_declares_the_seed_dags():
    # when
    result = declare(EXAMPLE)

    # then
    assert len(result.dag_ids) == 4
    assert (result.assets_created, result.aliases_created, result.activated) == (1, 1, 1)
    asset = Asset.objects.get()
    assert (asset.name, asset.uri, asset.group) == (
        "s3://bucket/my-task",
        "s3://bucket/my-task",
        "asset",
    )
    assert AssetActive.objects.get().asset == asset
    assert list(AssetAlias.objects.values_list("name", flat=True)) == ["example-alias"]
    consumer = Dag.objects.get(dag_id="asset_s3_bucket_consumer")
    assert consumer.asset_expression == {"asset": {"name": asset.name, "uri": asset.uri}}
    assert consumer.fileloc == str(EXAMPLE)
    assert consumer.is_paused is False
    alias_consumer = Dag.objects.get(dag_id="asset_alias_example_alias_consumer")
    assert alias_consumer.asset_expression == {"alias": {"name": "example-alias"}}
    assert alias_consumer.task_ids == ["consume_asset_alias_events"]
    assert DagScheduleAssetReference.objects.get().dag_id == "asset_s3_bucket_consumer"
    assert DagScheduleAssetAliasReference.objects.get().dag_id == alias_consumer.dag_id
    outlet = TaskOutletAssetReference.objects.get()
    assert (outlet.dag_id, outlet.task_id) == ("asset_s3_bucket_producer", "produce_asset_events")
    assert TaskInletAssetReference.objects.get().task_id == "consume_asset_events"


def test_declaring_the_example_twice_gives_the_same_rows():
    # given
    declare(EXAMPLE)
    first = snapshot()

    # when
    result = declare(EXAMPLE)

    # then
    assert snapshot() == first
    assert result.assets_created == 0


def test_declared_tasks_are_stored_with_retries_and_code_and_replaced_on_redeclare(tmp_path):
    # given
    path = write(
        tmp_path,
        {
            "dags": [
                {
                    "dag_id": "d",
                    "tasks": [
                        {"task_id": "a", "retries": 3, "retry_delay": 10, "callable": "t.py:f"},
                        {"task_id": "b"},
                    ],
                }
            ]
        },
    )
    declare(path)
    assert list(DagTask.objects.values_list("task_id", "retries", "retry_delay")) == [
        ("a", 3, 10.0),
        ("b", 0, 300.0),
    ]

    # when: declared again without task a
    path.write_text(json.dumps({"dags": [{"dag_id": "d", "tasks": [{"task_id": "b"}]}]}))
    declare(path)

    # then
    assert list(
        DagTask.objects.values_list("dag_id", "task_id", "retries", "retry_delay", "callable")
    ) == [("d", "b", 0, 300.0, "")]


def test_declared_task_rows_keep_retries_and_absolute_callable(tmp_path):
    path = write(
        tmp_path,
        {
            "dags": [
                {"dag_id": "d", "tasks": [{"task_id": "a", "retries": 3, "callable": "t.py:f"}]}
            ]
        },
    )
    declare(path)
    assert list(DagTask.objects.values_list("task_id", "retries", "callable")) == [
        ("a", 3, f"{tmp_path.resolve()}/t.py:f")
    ]


def test_all_of_any_of_nested_and_refs_are_stored(tmp_path):
    # when
    declare(write(tmp_path, NESTED_MANIFEST))

    # then
    assert {
        dag.dag_id: dag.asset_expression
        for dag in Dag.objects.filter(dag_id__in=NESTED_EXPRESSIONS)
    } == NESTED_EXPRESSIONS
    assert set(DagScheduleAssetReference.objects.values_list("dag_id", "asset__uri")) == {
        ("consumer", "s3://b/a"),
        ("listed", "s3://b/c"),
    }
    assert list(DagScheduleAssetAliasReference.objects.values_list("alias__name", flat=True)) == [
        "al"
    ]
    assert list(DagScheduleAssetNameReference.objects.values_list("name", flat=True)) == ["n"]
    assert list(DagScheduleAssetUriReference.objects.values_list("uri", flat=True)) == ["s3://b/u"]
    # refs and aliases do not make assets active; declared assets do
    assert active_uris() == {"s3://b/a", "s3://b/c"}


def test_empty_all_and_any_are_stored_as_airflow_stores_them_and_reference_nothing(tmp_path):
    # when: Airflow's schedule=[] and AssetAny(), as a manifest writes them
    declare(
        write(
            tmp_path,
            {
                "dags": [
                    {"dag_id": "on_nothing", "schedule": []},
                    {"dag_id": "on_none", "schedule": {"any": []}},
                ]
            },
        )
    )

    # then they are asset-scheduled DAGs that nothing queues
    assert dict(Dag.objects.values_list("dag_id", "asset_expression")) == {
        "on_nothing": {"all": []},
        "on_none": {"any": []},
    }
    for reference in TABLES[4:]:
        assert not reference.objects.exists()


def test_asset_uris_are_normalized_like_the_task_sdk(tmp_path):
    # when
    declare(
        write(
            tmp_path,
            {
                "dags": [
                    {
                        "dag_id": "p",
                        "tasks": [
                            {
                                "task_id": "t",
                                "outlets": [{"asset": {"uri": "S3://Bucket/x/?b=2&a=1"}}],
                            }
                        ],
                    }
                ]
            },
        )
    )

    # then
    asset = Asset.objects.get()
    assert asset.name == "S3://Bucket/x/?b=2&a=1"  # a uri given alone is copied before normalizing
    assert asset.uri == "s3://Bucket/x?a=1&b=2"


def test_group_and_extra_are_created_and_updated(tmp_path):
    # given
    def manifest(extra: dict) -> dict:
        outlet = {"asset": {"name": "a", "uri": "s3://b/a", "group": "g", "extra": extra}}
        return {"dags": [{"dag_id": "p", "tasks": [{"task_id": "t", "outlets": [outlet]}]}]}

    declare(write(tmp_path, manifest({"v": 1})))

    # when
    result = declare(write(tmp_path, manifest({"v": 2})))

    # then
    asset = Asset.objects.get()
    assert (asset.group, asset.extra) == ("g", {"v": 2})
    assert (result.assets_created, result.assets_updated) == (0, 1)


def test_is_paused_defaults_to_false_and_is_kept_when_omitted(tmp_path):
    # given
    path = write(tmp_path, {"dags": [{"dag_id": "d", "is_paused": True}]})
    declare(path)
    assert Dag.objects.get().is_paused is True

    # when the flag is omitted the stored value stays
    write(tmp_path, {"dags": [{"dag_id": "d"}]})
    declare(path)

    # then
    assert Dag.objects.get().is_paused is True
    write(tmp_path, {"dags": [{"dag_id": "d", "is_paused": False}]})
    declare(path)
    assert Dag.objects.get().is_paused is False


def test_missing_dag_becomes_stale_and_its_assets_inactive(tmp_path):
    # given two DAGs; "shared" is also declared by a DAG in another file
    both = {
        "dags": [
            {
                "dag_id": "keep",
                "tasks": [{"task_id": "t", "outlets": [{"asset": {"uri": "s3://b/keep"}}]}],
            },
            {
                "dag_id": "gone",
                "schedule": {"asset": {"uri": "s3://b/shared"}},
                "tasks": [{"task_id": "t", "outlets": [{"asset": {"uri": "s3://b/gone"}}]}],
            },
        ]
    }
    path = write(tmp_path, both)
    declare(path)
    other = {"dags": [{"dag_id": "other", "schedule": {"asset": {"uri": "s3://b/shared"}}}]}
    declare(write(tmp_path, other, name="other.yaml"))
    assert active_uris() == {"s3://b/keep", "s3://b/gone", "s3://b/shared"}

    # when "gone" disappears from its file
    write(tmp_path, {"dags": both["dags"][:1]})
    result = declare(path)

    # then
    assert result.stale_dag_ids == ["gone"]
    assert result.deactivated == 1
    gone = Dag.objects.get(dag_id="gone")
    assert gone.is_stale is True
    assert not DagScheduleAssetReference.objects.filter(dag=gone).exists()
    assert not TaskOutletAssetReference.objects.filter(dag=gone).exists()
    assert active_uris() == {"s3://b/keep", "s3://b/shared"}
    assert Asset.objects.filter(uri="s3://b/gone").exists()  # the asset row stays
    assert Dag.objects.get(dag_id="other").is_stale is False

    # when it comes back
    write(tmp_path, both)
    declare(path)

    # then
    assert Dag.objects.get(dag_id="gone").is_stale is False
    assert active_uris() == {"s3://b/keep", "s3://b/gone", "s3://b/shared"}


def test_changing_an_assets_uri_moves_the_active_name(tmp_path):
    # given
    def manifest(uri: str) -> dict:
        outlet = {"asset": {"name": "report", "uri": uri}}
        return {"dags": [{"dag_id": "p", "tasks": [{"task_id": "t", "outlets": [outlet]}]}]}

    path = write(tmp_path, manifest("s3://b/v1"))
    declare(path)

    # when
    write(tmp_path, manifest("s3://b/v2"))
    declare(path)

    # then
    assert list(AssetActive.objects.values_list("name", "uri")) == [("report", "s3://b/v2")]


@pytest.mark.parametrize(
    ("first", "second", "clash"),
    [
        pytest.param(
            {"name": "n", "uri": "s3://b/1"},
            {"name": "n", "uri": "s3://b/2"},
            "name 'n'",
            id="name",
        ),
        pytest.param(
            {"name": "x", "uri": "s3://b/u"},
            {"name": "y", "uri": "s3://b/u"},
            "uri 's3://b/u'",
            id="uri",
        ),
    ],
)
def test_conflicting_assets_in_one_manifest_are_rejected_and_nothing_written(
    tmp_path, first, second, clash
):
    # given
    manifest = {
        "dags": [
            {"dag_id": "p1", "tasks": [{"task_id": "t", "outlets": [{"asset": first}]}]},
            {"dag_id": "p2", "schedule": {"asset": second}},
        ]
    }

    # when
    with pytest.raises(AssetConflictError) as error:
        declare(write(tmp_path, manifest))

    # then
    message = str(error.value)
    assert clash in message
    assert repr(first["uri"]) in message
    assert repr(second["uri"]) in message
    assert all(not model.objects.exists() for model in TABLES)


def test_conflict_with_an_asset_active_from_another_file_is_rejected(tmp_path):
    # given
    declare(EXAMPLE)
    before = snapshot()
    clashing = {
        "dags": [
            {
                "dag_id": "new",
                "schedule": {"asset": {"name": "s3://bucket/my-task", "uri": "s3://other/x"}},
            }
        ]
    }

    # when
    with pytest.raises(AssetConflictError) as error:
        declare(write(tmp_path, clashing))

    # then
    message = str(error.value)
    assert "already active" in message
    assert "'s3://other/x'" in message
    assert "uri='s3://bucket/my-task'" in message
    assert snapshot() == before


def test_json_manifest_is_accepted(tmp_path):
    # given
    path = tmp_path / "dags.json"
    path.write_text(
        json.dumps(
            {
                "dags": [
                    {
                        "dag_id": "j",
                        "tasks": [{"task_id": "t", "inlets": [{"alias": {"name": "a"}}]}],
                    }
                ]
            }
        )
    )

    # when
    declare(path)

    # then
    assert Dag.objects.get().dag_id == "j"
    assert AssetAlias.objects.get().name == "a"


def test_a_dag_declared_by_another_file_moves_with_a_warning(tmp_path):
    # given
    declare(write(tmp_path, {"dags": [{"dag_id": "d"}]}, name="first.yaml"))

    # when
    result = declare(write(tmp_path, {"dags": [{"dag_id": "d"}]}, name="second.yaml"))

    # then
    assert result.warnings == [f"DAG d moved from {tmp_path / 'first.yaml'}"]
    assert Dag.objects.get().fileloc == str(tmp_path / "second.yaml")
    assert declare(tmp_path / "second.yaml").warnings == []


def test_an_asset_ref_that_matches_no_declared_asset_is_warned_about(tmp_path):
    # given refs in a schedule and in task outlets/inlets; only "orders" is declared (here)
    # and "s3://other/x" by another file
    declare(
        write(
            tmp_path,
            {"dags": [{"dag_id": "o", "schedule": {"asset": {"uri": "s3://other/x"}}}]},
            name="other.yaml",
        )
    )
    document = {
        "dags": [
            {
                "dag_id": "p",
                "tasks": [
                    {
                        "task_id": "t",
                        "outlets": [
                            {"asset": {"name": "orders", "uri": "s3://w/orders"}},
                            {"asset_ref": {"name": "customers"}},
                            {"asset_ref": {"name": "orders"}},
                        ],
                        "inlets": [{"asset_ref": {"uri": "s3://w/missing"}}],
                    }
                ],
            },
            {
                "dag_id": "c",
                "schedule": {
                    "any": [{"asset_ref": {"uri": "s3://other/x"}}, {"asset_ref": {"name": "nope"}}]
                },
            },
        ]
    }

    # when
    result = declare(write(tmp_path, document))

    # then one warning per unmatched ref, naming where it is
    assert result.warnings == [
        "DAG p task t outlet: asset_ref {name: 'customers'} matches no declared asset; it "
        "resolves to nothing until a manifest declares an asset with name 'customers'",
        "DAG p task t inlet: asset_ref {uri: 's3://w/missing'} matches no declared asset; it "
        "resolves to nothing until a manifest declares an asset with uri 's3://w/missing'",
        "DAG c schedule: asset_ref {name: 'nope'} matches no declared asset; it resolves to "
        "nothing until a manifest declares an asset with name 'nope'",
    ]


def test_dags_set_paused_changes_only_what_differs():
    # given
    declare(EXAMPLE)
    Dag.objects.filter(dag_id="asset_s3_bucket_consumer").update(is_paused=True)

    # when
    changed = dags_set_paused(
        dag_ids=["asset_s3_bucket_consumer", "asset_s3_bucket_producer", "unknown"],
        is_paused=True,
    )

    # then
    assert changed == 1
    assert set(Dag.objects.filter(is_paused=True).values_list("dag_id", flat=True)) == {
        "asset_s3_bucket_consumer",
        "asset_s3_bucket_producer",
    }
    assert dags_set_paused(dag_ids=["asset_s3_bucket_consumer"], is_paused=False) == 1


def test_edges_trigger_rules_and_time_schedules_are_stored(tmp_path):
    # given
    path = write(
        tmp_path,
        {
            "dags": [
                {
                    "dag_id": "nightly",
                    "schedule": "0 2 * * *",
                    "timezone": "Europe/Berlin",
                    "max_active_runs": 1,
                    "tags": ["reports"],
                    "tasks": [
                        {"task_id": "extract"},
                        {"task_id": "load", "upstream": ["extract"], "trigger_rule": "all_done"},
                    ],
                }
            ]
        },
    )

    # when
    declare(path)

    # then
    dag = Dag.objects.get(dag_id="nightly")
    assert dag.timetable == {"cron": "0 2 * * *", "timezone": "Europe/Berlin"}
    assert (dag.timetable_summary, dag.max_active_runs, dag.tags) == ("0 2 * * *", 1, ["reports"])
    assert dag.asset_expression is None
    assert list(DagTask.objects.values_list("task_id", "upstream", "trigger_rule", "is_leaf")) == [
        ("extract", [], "all_success", False),
        ("load", ["extract"], "all_done", True),
    ]
