"""Service-level tests of asset_changes_register (docs/concepts.md), against the database."""

from __future__ import annotations

import json
import logging
import re
from datetime import timedelta
from typing import Any

import pytest
from django.apps import apps
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from assets_app.models import (
    Asset,
    AssetActive,
    AssetAlias,
    AssetAliasAsset,
    AssetAliasAssetEvent,
    AssetDagRunQueue,
    AssetEvent,
    DagScheduleAssetAliasReference,
    DagScheduleAssetNameReference,
    DagScheduleAssetReference,
    DagScheduleAssetUriReference,
    TaskInstance,
    TaskInstanceState,
)
from assets_app.outlets import (
    AliasOutletEvent,
    AssetOutletEvent,
    OutletProfile,
    OutletType,
)
from assets_app.services.assets.registration import RegistrationResult, asset_changes_register
from assets_app.signals import asset_changed, asset_event_emitted
from task_sdk.definitions import AssetUniqueKey
from tests.factories import AssetAliasFactory, AssetFactory, DagFactory, TaskInstanceFactory

pytestmark = pytest.mark.django_db


# --- helpers --------------------------------------------------------------------------------


def active_asset(name: str, uri: str, **fields: Any) -> Asset:
    asset = AssetFactory(name=name, uri=uri, **fields)
    AssetActive.objects.create(asset=asset, name=name, uri=uri)
    return asset


def asset_outlet(name: str, uri: str) -> OutletProfile:
    return OutletProfile(type=OutletType.ASSET, name=name, uri=uri)


def name_ref(name: str) -> OutletProfile:
    return OutletProfile(type=OutletType.NAME_REF, name=name)


def uri_ref(uri: str) -> OutletProfile:
    return OutletProfile(type=OutletType.URI_REF, uri=uri)


def alias_outlet(name: str) -> OutletProfile:
    return OutletProfile(type=OutletType.ALIAS, name=name)


def asset_event(
    name: str, uri: str, extra: dict[str, Any] | None = None, partition_key: str | None = None
) -> AssetOutletEvent:
    return AssetOutletEvent(
        key=AssetUniqueKey(name=name, uri=uri), extra=extra or {}, partition_key=partition_key
    )


def alias_event(
    alias: str,
    name: str,
    uri: str,
    extra: dict[str, Any] | None = None,
    dest_asset_extra: dict[str, Any] | None = None,
    partition_key: str | None = None,
) -> AliasOutletEvent:
    return AliasOutletEvent(
        source_alias_name=alias,
        dest_asset_key=AssetUniqueKey(name=name, uri=uri),
        extra=extra or {},
        dest_asset_extra=dest_asset_extra or {},
        partition_key=partition_key,
    )


def register(
    ti: TaskInstance,
    outlets: list[OutletProfile],
    events: list[AssetOutletEvent | AliasOutletEvent] | None = None,
) -> RegistrationResult:
    return asset_changes_register(
        task_instance=ti, task_outlets=outlets, outlet_events=events or []
    )


def event_rows() -> list[tuple[str, dict[str, Any], str | None]]:
    rows = [
        (e.asset.name, e.extra, e.partition_key) for e in AssetEvent.objects.select_related("asset")
    ]
    return sorted(rows, key=lambda r: (r[0], json.dumps(r[1], sort_keys=True), r[2] or ""))


def source_aliases(event: AssetEvent) -> list[str]:
    return sorted(event.source_aliases.values_list("name", flat=True))


@pytest.fixture
def ti() -> TaskInstance:
    return TaskInstanceFactory(state=TaskInstanceState.RUNNING, task_id="produce", map_index=3)


# --- declared assets and refs ---------------------------------------------------------------

# the three ways of declaring the active asset ("asset_one", "s3://bucket/one")
ASSET_ONE_DECLARATIONS = [
    pytest.param(asset_outlet("asset_one", "s3://bucket/one"), id="asset"),
    pytest.param(name_ref("asset_one"), id="name-ref"),
    pytest.param(uri_ref("s3://bucket/one"), id="uri-ref"),
]


def test_declared_asset_without_events_gets_one_event_with_empty_extra(ti):
    # given
    asset = active_asset("asset_one", "s3://bucket/one")

    # when
    result = register(ti, [asset_outlet("asset_one", "s3://bucket/one")])

    # then
    event = AssetEvent.objects.get()
    assert result.event_ids == (event.pk,)
    assert result.changed_asset_ids == (asset.pk,)
    assert result.skipped == ()
    assert event.asset_id == asset.pk
    assert event.extra == {}
    assert event.partition_key is None
    assert (event.source_dag_id, event.source_task_id, event.source_run_id) == (
        ti.dag_id,
        "produce",
        ti.run_id,
    )
    assert event.source_map_index == 3
    assert event.timestamp is not None
    assert event.source_aliases.count() == 0


@pytest.mark.parametrize("outlet", ASSET_ONE_DECLARATIONS)
def test_declared_outlet_without_events(ti, outlet):
    active_asset("asset_one", "s3://bucket/one")

    register(ti, [outlet])

    assert event_rows() == [("asset_one", {}, None)]


@pytest.mark.parametrize("outlet", ASSET_ONE_DECLARATIONS)
def test_declared_outlet_takes_its_events_extra_and_ignores_undeclared_assets(ti, outlet):
    # given: an event for the declared asset and one for an undeclared (but active) asset
    active_asset("asset_one", "s3://bucket/one")
    active_asset("other", "s3://bucket/other")

    # when
    register(
        ti,
        [outlet],
        [
            asset_event("asset_one", "s3://bucket/one", {"k": "v"}),
            asset_event("other", "s3://bucket/other", {"k": "ignored"}),
        ],
    )

    # then
    assert event_rows() == [("asset_one", {"k": "v"}, None)]


def test_wire_sample_name_and_uri_refs(ti):
    # given: success_name_ref.json, where the refs resolve to two different assets
    active_asset("by_name_asset", "s3://bucket/by-name")
    active_asset("by_uri_asset", "s3://bucket/by-uri")

    # when
    register(
        ti,
        [name_ref("by_name_asset"), uri_ref("s3://bucket/by-uri")],
        [
            asset_event("by_name_asset", "s3://bucket/by-name", {"via": "name"}),
            asset_event("by_uri_asset", "s3://bucket/by-uri", {"via": "uri"}),
        ],
    )

    # then
    assert event_rows() == [
        ("by_name_asset", {"via": "name"}, None),
        ("by_uri_asset", {"via": "uri"}, None),
    ]


def test_asset_declared_directly_and_through_refs_gets_one_event_per_declaration(ti):
    active_asset("asset_one", "s3://bucket/one")

    result = register(
        ti,
        [
            asset_outlet("asset_one", "s3://bucket/one"),
            asset_outlet("asset_one", "s3://bucket/one"),  # a repeat is one declaration
            name_ref("asset_one"),
            uri_ref("s3://bucket/one"),
        ],
        [asset_event("asset_one", "s3://bucket/one", {"k": "v"})],
    )

    assert len(result.events) == 3
    assert event_rows() == [("asset_one", {"k": "v"}, None)] * 3
    assert result.changed_asset_ids == (Asset.objects.get().pk,)


def test_nested_extras_are_stored_as_sent(ti):
    active_asset("asset_one", "s3://bucket/one")
    extra = {"a": {"b": [1, 2, {"c": None}], "d": True}, "e": 1.5, "ü": "ß"}

    register(
        ti,
        [asset_outlet("asset_one", "s3://bucket/one"), alias_outlet("al")],
        [
            asset_event("asset_one", "s3://bucket/one", extra),
            alias_event("al", "dyn", "s3://bucket/dyn", extra, dest_asset_extra=extra),
        ],
    )

    assert [e.extra for e in AssetEvent.objects.all()] == [extra, extra]
    assert Asset.objects.get(name="dyn").extra == extra


def test_partition_keys_fan_out_into_one_event_per_key(ti):
    # given: success_partitions.json
    active_asset("asset_one", "s3://bucket/one")
    consumer = DagFactory()
    DagScheduleAssetReference.objects.create(asset=Asset.objects.get(), dag=consumer)

    # when
    result = register(
        ti,
        [asset_outlet("asset_one", "s3://bucket/one")],
        [
            asset_event("asset_one", "s3://bucket/one", {"k": "v"}, "2026-01-02"),
            asset_event("asset_one", "s3://bucket/one", {"k": "v"}, "2026-01-01"),
            asset_event("asset_one", "s3://bucket/one", {"k": "last"}, "2026-01-01"),
        ],
    )

    # then: last write per key wins; partitioned events queue no (non-partitioned) consumer
    assert event_rows() == [
        ("asset_one", {"k": "last"}, "2026-01-01"),
        ("asset_one", {"k": "v"}, "2026-01-02"),
    ]
    assert result.queued == ()
    assert not AssetDagRunQueue.objects.exists()


@pytest.mark.parametrize(
    ("outlet", "described"),
    [
        pytest.param(
            asset_outlet("gone", "s3://bucket/gone"),
            "Asset(name='gone', uri='s3://bucket/gone')",
            id="asset",
        ),
        pytest.param(name_ref("gone"), "Asset.ref(name='gone')", id="name-ref"),
        pytest.param(
            uri_ref("s3://bucket/gone"), "Asset.ref(uri='s3://bucket/gone')", id="uri-ref"
        ),
    ],
)
@pytest.mark.parametrize("exists", [False, True], ids=["unknown", "inactive"])
def test_unknown_or_inactive_declared_outlet_is_skipped_and_logged(
    ti, caplog, outlet, described, exists
):
    # given
    if exists:
        AssetFactory(name="gone", uri="s3://bucket/gone")  # not active
    active_asset("asset_one", "s3://bucket/one")

    # when
    with caplog.at_level(logging.WARNING, logger="assets_app.services.assets.registration"):
        result = register(
            ti,
            [outlet, asset_outlet("asset_one", "s3://bucket/one")],
            [asset_event("gone", "s3://bucket/gone", {"k": "v"})],
        )

    # then
    assert result.skipped == (outlet,)
    assert event_rows() == [("asset_one", {}, None)]
    assert described in caplog.text
    assert caplog.records[-1].levelno == logging.WARNING


def test_only_unknown_outlets_register_nothing(ti, caplog):
    result = register(ti, [asset_outlet("gone", "s3://bucket/gone")])

    assert result == RegistrationResult(skipped=(asset_outlet("gone", "s3://bucket/gone"),))
    assert not AssetEvent.objects.exists()
    assert "gone" in caplog.text


@pytest.mark.parametrize("outlet", [name_ref(" "), uri_ref(" \t")], ids=["name", "uri"])
@pytest.mark.parametrize("alone", [True, False], ids=["alone", "with-an-asset"])
def test_ref_of_whitespace_is_skipped_and_logged(ti, caplog, outlet, alone):
    # given: a ref no task_sdk would build (the wire accepts any 1 to 1500 characters)
    active_asset("asset_one", "s3://bucket/one")
    others = [] if alone else [asset_outlet("asset_one", "s3://bucket/one")]

    # when
    with caplog.at_level(logging.WARNING, logger="assets_app.services.assets.registration"):
        result = register(ti, [outlet, *others])

    # then
    assert result.skipped == (outlet,)
    assert event_rows() == ([] if alone else [("asset_one", {}, None)])
    assert "Asset.ref(" in caplog.records[-1].getMessage()


def test_no_outlets_register_nothing(ti):
    assert register(ti, []) == RegistrationResult()
    assert not AssetEvent.objects.exists()


# --- aliases --------------------------------------------------------------------------------


def test_declared_alias_without_events_registers_nothing(ti):
    result = register(ti, [alias_outlet("my_alias")])

    assert result.events == ()
    assert not AssetEvent.objects.exists()
    assert not AssetAlias.objects.exists()


def test_alias_event_to_a_new_asset(ti):
    # given: success_alias.json, neither the asset nor the alias row exists yet
    # when
    result = register(
        ti,
        [alias_outlet("my_alias")],
        [alias_event("my_alias", "dyn_asset", "s3://bucket/dyn", {"k": "v"}, {"asset_level": "x"})],
    )

    # then: the asset is created inactive with dest_asset_extra as its extra
    asset = Asset.objects.get()
    assert (asset.name, asset.uri, asset.extra) == (
        "dyn_asset",
        "s3://bucket/dyn",
        {"asset_level": "x"},
    )
    assert not AssetActive.objects.exists()
    alias = AssetAlias.objects.get()
    assert alias.name == "my_alias"
    # Airflow's default group, as for an Asset/AssetAlias declared without one
    assert (asset.group, alias.group) == ("asset", "asset")
    assert list(AssetAliasAsset.objects.values_list("alias_id", "asset_id")) == [
        (alias.pk, asset.pk)
    ]
    event = AssetEvent.objects.get()
    assert result.event_ids == (event.pk,)
    assert (event.asset_id, event.extra) == (asset.pk, {"k": "v"})
    assert (event.source_task_id, event.source_map_index) == ("produce", 3)
    assert source_aliases(event) == ["my_alias"]


def test_alias_event_to_an_existing_asset_keeps_its_extra_and_links_once(ti):
    # given: the asset, the alias and their link exist already
    asset = active_asset("dyn_asset", "s3://bucket/dyn", extra={"old": 1})
    alias = AssetAliasFactory(name="my_alias")
    AssetAliasAsset.objects.create(alias=alias, asset=asset)

    # when: twice
    for _ in range(2):
        register(
            ti,
            [alias_outlet("my_alias")],
            [alias_event("my_alias", "dyn_asset", "s3://bucket/dyn", {"k": "v"}, {"new": 2})],
        )

    # then
    assert Asset.objects.get().extra == {"old": 1}
    assert AssetAlias.objects.count() == 1
    assert AssetAliasAsset.objects.count() == 1
    assert AssetEvent.objects.count() == 2
    assert AssetAliasAssetEvent.objects.count() == 2


def test_alias_events_to_an_undeclared_alias_are_ignored(ti):
    # given: events through the declared alias and through one the task did not declare
    # when
    register(
        ti,
        [alias_outlet("my_alias")],
        [
            alias_event("my_alias", "dyn_asset", "s3://bucket/dyn", {"k": "v"}),
            alias_event("undeclared", "dyn_asset", "s3://bucket/dyn", {"k": "v"}),
            alias_event("undeclared", "other", "s3://bucket/other", {"k": "v"}),
        ],
    )

    # then: exactly one event, linked to the declared alias only
    event = AssetEvent.objects.get()
    assert event.asset.name == "dyn_asset"
    assert source_aliases(event) == ["my_alias"]
    assert list(AssetAlias.objects.values_list("name", flat=True)) == ["my_alias"]
    assert list(Asset.objects.values_list("name", flat=True)) == ["dyn_asset"]
    assert AssetAliasAsset.objects.count() == 1


def test_three_aliases_emitting_one_asset_with_two_extras_give_two_events(ti):
    # when
    register(
        ti,
        [alias_outlet("a1"), alias_outlet("a2"), alias_outlet("a3")],
        [
            alias_event("a1", "dyn", "s3://bucket/dyn", {}),
            alias_event("a2", "dyn", "s3://bucket/dyn", {}),
            alias_event("a3", "dyn", "s3://bucket/dyn", {"k": "v"}),
        ],
    )

    # then
    events = {tuple(source_aliases(e)): e.extra for e in AssetEvent.objects.all()}
    assert events == {("a1", "a2"): {}, ("a3",): {"k": "v"}}
    asset = Asset.objects.get()
    assert sorted(asset.aliases.values_list("name", flat=True)) == ["a1", "a2", "a3"]
    assert AssetAliasAsset.objects.count() == 3


def test_alias_events_group_on_canonical_json(ti):
    # given: the same extras with keys in another order, and a different dest_asset_extra
    register(
        ti,
        [alias_outlet("a1"), alias_outlet("a2")],
        [
            alias_event("a1", "dyn", "s3://d", {"x": 1, "y": {"p": 1, "q": 2}}, {"m": 1}),
            alias_event("a2", "dyn", "s3://d", {"y": {"q": 2, "p": 1}, "x": 1}, {"m": 1}),
            alias_event("a2", "dyn", "s3://d", {"x": 1, "y": {"p": 1, "q": 2}}, {"m": 2}),
            alias_event("a1", "dyn", "s3://d", {"x": 1}, {"m": 1}, partition_key="p1"),
        ],
    )

    # then: (same extras, m=1) → one event for both aliases; m=2 → another; partition → another
    groups = sorted((tuple(source_aliases(e)), e.partition_key) for e in AssetEvent.objects.all())
    assert groups == [(("a1",), "p1"), (("a1", "a2"), None), (("a2",), None)]
    # the target was created with the first dest_asset_extra seen
    assert Asset.objects.get().extra == {"m": 1}


def test_alias_events_group_on_extras_beyond_64_bit_integers(ti):
    # given: extras orjson cannot encode (an integer beyond 64 bits), keys in another order
    big = 2**70
    register(
        ti,
        [alias_outlet("a1"), alias_outlet("a2")],
        [
            alias_event("a1", "dyn", "s3://d", {"n": big, "k": "v"}),
            alias_event("a2", "dyn", "s3://d", {"k": "v", "n": big}),
            alias_event("a2", "dyn", "s3://d", {"k": "v", "n": big + 1}),
        ],
    )

    # then: grouped as any other extras
    groups = sorted((tuple(source_aliases(e)), e.extra["n"]) for e in AssetEvent.objects.all())
    assert groups == [(("a1", "a2"), big), (("a2",), big + 1)]


def test_alias_target_need_not_be_active(ti):
    AssetFactory(name="dyn", uri="s3://bucket/dyn")  # inactive

    register(ti, [alias_outlet("al")], [alias_event("al", "dyn", "s3://bucket/dyn")])

    assert event_rows() == [("dyn", {}, None)]
    assert Asset.objects.count() == 1


def test_mixed_asset_alias_and_refs_in_one_call(ti):
    # given: success_metadata.json plus refs
    active_asset("asset_one", "s3://bucket/one")
    active_asset("by_name", "s3://bucket/by-name")
    active_asset("by_uri", "s3://bucket/by-uri")

    # when
    result = register(
        ti,
        [
            asset_outlet("asset_one", "s3://bucket/one"),
            alias_outlet("my_alias"),
            name_ref("by_name"),
            uri_ref("s3://bucket/by-uri"),
        ],
        [
            asset_event("asset_one", "s3://bucket/one", {"k": "meta"}),
            # a plain entry for the alias target, which is not a declared outlet: ignored
            asset_event("dyn_asset", "s3://bucket/dyn", {"k": "meta-alias"}),
            alias_event(
                "my_alias", "dyn_asset", "s3://bucket/dyn", {"k": "meta-alias"}, {"lvl": "x"}
            ),
            asset_event("by_name", "s3://bucket/by-name", {"via": "name"}),
        ],
    )

    # then
    assert event_rows() == [
        ("asset_one", {"k": "meta"}, None),
        ("by_name", {"via": "name"}, None),
        ("by_uri", {}, None),
        ("dyn_asset", {"k": "meta-alias"}, None),
    ]
    assert len(result.changed_asset_ids) == 4
    dyn_event = AssetEvent.objects.get(asset__name="dyn_asset")
    assert source_aliases(dyn_event) == ["my_alias"]
    assert AssetAliasAssetEvent.objects.count() == 1


# --- consumers ------------------------------------------------------------------------------


def test_consumers_are_queued_once_per_asset_and_dag(ti):
    # given: DAGs scheduled directly, through the alias, through a name ref and a uri ref
    asset = active_asset("asset_one", "s3://bucket/one")
    alias = AssetAliasFactory(name="my_alias")
    direct, via_alias, via_name, via_uri, paused, stale, unrelated = (
        DagFactory(dag_id=d)
        for d in ("direct", "via_alias", "via_name", "via_uri", "paused", "stale", "unrelated")
    )
    paused.is_paused = True
    paused.save()
    stale.is_stale = True
    stale.save()
    DagScheduleAssetReference.objects.create(asset=asset, dag=direct)
    DagScheduleAssetReference.objects.create(asset=asset, dag=paused)
    DagScheduleAssetReference.objects.create(asset=asset, dag=stale)
    DagScheduleAssetAliasReference.objects.create(alias=alias, dag=via_alias)
    DagScheduleAssetAliasReference.objects.create(alias=alias, dag=paused)
    DagScheduleAssetNameReference.objects.create(name="asset_one", dag=via_name)
    DagScheduleAssetNameReference.objects.create(name="asset_one", dag=direct)
    DagScheduleAssetUriReference.objects.create(uri="s3://bucket/one", dag=via_uri)
    DagScheduleAssetUriReference.objects.create(uri="s3://other", dag=unrelated)
    AssetAliasFactory(name="other_alias")
    DagScheduleAssetAliasReference.objects.create(
        alias=AssetAlias.objects.get(name="other_alias"), dag=unrelated
    )
    outlets = [asset_outlet("asset_one", "s3://bucket/one"), alias_outlet("my_alias")]
    events = [alias_event("my_alias", "asset_one", "s3://bucket/one", {"via": "alias"})]

    # when: the direct outlet and the alias both emit for the asset
    result = register(ti, outlets, events)

    # then
    expected = [
        (asset.pk, "direct"),
        (asset.pk, "via_alias"),
        (asset.pk, "via_name"),
        (asset.pk, "via_uri"),
    ]
    assert list(result.queued) == expected
    queue = AssetDagRunQueue.objects.order_by("target_dag_id")
    assert list(queue.values_list("asset_id", "target_dag_id")) == expected

    # when: again — an existing (asset, dag) pair is a no-op
    first_created = {q.target_dag_id: q.created_at for q in queue}
    again = register(ti, outlets, events)

    # then
    assert list(again.queued) == expected
    assert {q.target_dag_id: q.created_at for q in queue} == first_created
    assert AssetEvent.objects.count() == 4


def test_alias_consumer_queued_for_a_new_asset(ti):
    # given: the seed's alias consumer, scheduled on an alias whose target does not exist yet
    alias = AssetAliasFactory(name="example-alias")
    consumer = DagFactory(dag_id="asset_alias_example_alias_consumer")
    DagScheduleAssetAliasReference.objects.create(alias=alias, dag=consumer)

    # when
    register(
        ti,
        [alias_outlet("example-alias")],
        [alias_event("example-alias", "s3://bucket/my-task", "s3://bucket/my-task")],
    )

    # then
    new_asset = Asset.objects.get()
    assert list(AssetDagRunQueue.objects.values_list("asset_id", "target_dag_id")) == [
        (new_asset.pk, "asset_alias_example_alias_consumer")
    ]


def test_paused_consumer_is_not_queued(ti):
    asset = active_asset("asset_one", "s3://bucket/one")
    dag = DagFactory(is_paused=True)
    DagScheduleAssetReference.objects.create(asset=asset, dag=dag)

    result = register(ti, [asset_outlet("asset_one", "s3://bucket/one")])

    assert result.queued == ()
    assert not AssetDagRunQueue.objects.exists()


# --- notifications --------------------------------------------------------------------------


@pytest.fixture
def received():
    calls: list[tuple[str, Any]] = []

    def on_changed(sender, asset, **kwargs):
        calls.append(("asset_changed", asset.name))

    def on_emitted(sender, event, source_alias_names, **kwargs):
        calls.append(("asset_event_emitted", (event.asset.name, source_alias_names)))

    asset_changed.connect(on_changed, dispatch_uid="test-changed")
    asset_event_emitted.connect(on_emitted, dispatch_uid="test-emitted")
    yield calls
    asset_changed.disconnect(dispatch_uid="test-changed")
    asset_event_emitted.disconnect(dispatch_uid="test-emitted")


def test_signals_are_sent_after_commit_only(ti, received, django_capture_on_commit_callbacks):
    # given
    active_asset("asset_one", "s3://bucket/one")

    # when
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        register(
            ti,
            [asset_outlet("asset_one", "s3://bucket/one"), alias_outlet("al")],
            [alias_event("al", "dyn", "s3://dyn")],
        )

    # then: nothing inside the transaction, everything once it commits
    assert received == []
    assert len(callbacks) == 1
    callbacks[0]()
    assert sorted(received) == [
        ("asset_changed", "asset_one"),
        ("asset_changed", "dyn"),
        ("asset_event_emitted", ("asset_one", ())),
        ("asset_event_emitted", ("dyn", ("al",))),
    ]


def test_no_signal_when_the_transaction_rolls_back(
    ti, received, django_capture_on_commit_callbacks
):
    active_asset("asset_one", "s3://bucket/one")

    with (  # noqa: PT012 - the failure must come after registering, in the transaction
        django_capture_on_commit_callbacks(execute=True) as callbacks,
        pytest.raises(RuntimeError),
        transaction.atomic(),
    ):
        register(ti, [asset_outlet("asset_one", "s3://bucket/one")])
        raise RuntimeError("the state change failed after registration")

    assert callbacks == []
    assert received == []
    assert not AssetEvent.objects.exists()


def test_signal_per_changed_asset_once(ti, received, django_capture_on_commit_callbacks):
    active_asset("asset_one", "s3://bucket/one")

    with django_capture_on_commit_callbacks(execute=True):
        register(ti, [asset_outlet("asset_one", "s3://bucket/one"), name_ref("asset_one")])

    assert received.count(("asset_changed", "asset_one")) == 1
    assert received.count(("asset_event_emitted", ("asset_one", ()))) == 2


def test_a_receiver_may_read_every_field_of_the_asset(ti, django_capture_on_commit_callbacks):
    # given: an alias target created by this success; only an asset_changed receiver
    seen: list[tuple[Any, ...]] = []

    def on_changed(sender, asset, **kwargs):
        seen.append((asset.name, asset.extra, asset.created_at, asset.updated_at))

    asset_changed.connect(on_changed, dispatch_uid="test-fields")
    try:
        with django_capture_on_commit_callbacks(execute=True):
            register(
                ti,
                [alias_outlet("al")],
                [alias_event("al", "dyn", "s3://dyn", dest_asset_extra={"owner": "team"})],
            )
    finally:
        asset_changed.disconnect(dispatch_uid="test-fields")

    # then: the timestamps the registration did not read are loaded on access
    stored = Asset.objects.get(name="dyn")
    assert seen == [("dyn", {"owner": "team"}, stored.created_at, stored.updated_at)]


def test_no_signal_is_sent_to_nobody(ti, django_capture_on_commit_callbacks, monkeypatch):
    # given: no receiver connected (the signals' send_robust would be called 2,000 times for
    # 1,000 alias events)
    active_asset("asset_one", "s3://bucket/one")
    sent: list[str] = []
    for signal, name in ((asset_changed, "changed"), (asset_event_emitted, "emitted")):
        monkeypatch.setattr(signal, "send_robust", lambda *a, name=name, **k: sent.append(name))

    with django_capture_on_commit_callbacks(execute=True):
        result = register(ti, [asset_outlet("asset_one", "s3://bucket/one")])

    assert len(result.events) == 1
    assert sent == []


def test_failing_receiver_is_logged_not_raised(
    ti, received, caplog, django_capture_on_commit_callbacks
):
    # given: a receiver that raises, connected before the recording one
    def broken(sender, **kwargs):
        raise RuntimeError("receiver exploded")

    asset_event_emitted.connect(broken, dispatch_uid="test-broken")
    active_asset("asset_one", "s3://bucket/one")

    # when
    try:
        with django_capture_on_commit_callbacks(execute=True):
            result = register(ti, [asset_outlet("asset_one", "s3://bucket/one")])
    finally:
        asset_event_emitted.disconnect(dispatch_uid="test-broken")

    # then: registered, other receivers ran, the failure is logged by the service
    assert len(result.events) == 1
    assert ("asset_event_emitted", ("asset_one", ())) in received
    failures = [r for r in caplog.records if r.name == "assets_app.services.assets.registration"]
    assert failures
    assert failures[0].levelno == logging.ERROR
    assert "asset_event_emitted" in failures[0].getMessage()
    assert "receiver exploded" in caplog.text


# --- statement count ------------------------------------------------------------------------

TABLES = {model._meta.db_table for model in apps.get_app_config("assets_app").get_models()}


def statement_step(sql: str) -> str:
    """``"INSERT <table>"`` (``" + "`` between the tables of one statement inserting into
    several, each once: on PostgreSQL the rows of new alias targets have inserts of their own,
    see ``test_rows_of_new_targets_are_inserted_without_a_conflict_check``) or
    ``"SELECT <table>"`` (the first app table read) per statement."""
    if inserts := re.findall(r"\bINSERT INTO \"?(\w+)", sql):
        return " + ".join(f"INSERT {table}" for table in dict.fromkeys(inserts))
    read = [t for t in re.findall(r"\bFROM \"?(\w+)", sql) if t in TABLES]
    return f"SELECT {read[0]}"


def register_recording(
    ti: TaskInstance, outlets, events
) -> tuple[RegistrationResult, list[tuple[str, Any]]]:
    """:func:`register`, and the ``(sql, params)`` of each statement it sent."""
    sent: list[tuple[str, Any]] = []

    def record(execute, sql, params, many, context):
        sent.append((sql, params))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        return register(ti, outlets, events), sent


def count_statements(ti: TaskInstance, outlets, events) -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        register(ti, outlets, events)
    return [statement_step(query["sql"]) for query in captured.captured_queries]


# The fixed plan of the calls that declare an outlet, on PostgreSQL and SQLite alike
# (docs/concepts.md, "Guarantees": constant whatever the sizes). Each statement takes its
# rows as one JSON parameter, so nothing is ever split into batches; a step with no rows is
# not sent.
FIXED_PLAN = [
    "INSERT asset_alias",  # 2. aliases, ON CONFLICT (name) DO NOTHING
    "INSERT asset",  # 1. alias targets, ON CONFLICT (name, uri) DO NOTHING, RETURNING the new
    "SELECT asset",  # 3. active assets for declared keys/names/uris, other alias targets by key
    "SELECT asset_alias",  # 4. aliases by name
    "INSERT asset_alias_asset",  # 5. alias → asset links, ON CONFLICT DO NOTHING
    "INSERT asset_event",  # 6. all events, RETURNING id
    "INSERT asset_alias_asset_event",  # 7. alias → event links
    "INSERT asset_dag_run_queue",  # 8. live consumers (UNION over the 4 reference tables),
    #                                   upserted ON CONFLICT DO UPDATE, RETURNING the pairs
]
if connection.vendor == "postgresql":  # independent writes go as one statement
    FIXED_PLAN = [
        "INSERT asset_alias + INSERT asset",  # 2 and 1 (its main part, RETURNING the new)
        "SELECT asset",
        "SELECT asset_alias",
        "INSERT asset_alias_asset + INSERT asset_event + INSERT asset_alias_asset_event"
        " + INSERT asset_dag_run_queue",  # 5-8
    ]
#: alias events whose targets all had to be created, no declared asset: statement 3 has
#: nothing left to read (statement 1 returned every target)
NEW_TARGETS_PLAN = [step for step in FIXED_PLAN if step != "SELECT asset"]
#: declared assets, no alias: the steps with rows
DECLARED_ASSETS_PLAN = ["SELECT asset", "INSERT asset_event", "INSERT asset_dag_run_queue"]
if connection.vendor == "postgresql":
    DECLARED_ASSETS_PLAN = ["SELECT asset", "INSERT asset_event + INSERT asset_dag_run_queue"]


def declared_assets(count: int) -> tuple[list[OutletProfile], list[AssetOutletEvent]]:
    consumer = DagFactory(dag_id=f"consumer_of_{count}_assets")
    outlets, events = [], []
    for n in range(count):
        asset = active_asset(f"a{count}_{n}", f"s3://b/a{count}_{n}")
        DagScheduleAssetReference.objects.create(asset=asset, dag=consumer)
        outlets.append(asset_outlet(asset.name, asset.uri))
        events.append(asset_event(asset.name, asset.uri, {"n": n}))
    return outlets, events


def alias_to_new_assets(count: int) -> tuple[list[OutletProfile], list[AliasOutletEvent]]:
    alias = AssetAliasFactory(name=f"alias_{count}")
    DagScheduleAssetAliasReference.objects.create(alias=alias, dag=DagFactory())
    events = [
        alias_event(alias.name, f"new{count}_{n}", f"s3://new/{count}/{n}", {"n": n}, {"d": n})
        for n in range(count)
    ]
    return [alias_outlet(alias.name)], events


@pytest.mark.parametrize("count", [1, 100])
def test_statements_for_declared_assets_are_the_fixed_plan(ti, count):
    outlets, events = declared_assets(count)

    assert count_statements(ti, outlets, events) == DECLARED_ASSETS_PLAN
    assert AssetDagRunQueue.objects.count() == count


@pytest.mark.parametrize("count", [1, 1000])
def test_statements_for_alias_events_to_new_assets_are_the_fixed_plan(ti, count):
    outlets, events = alias_to_new_assets(count)

    assert count_statements(ti, outlets, events) == NEW_TARGETS_PLAN
    assert AssetEvent.objects.count() == count
    assert AssetAliasAsset.objects.count() == count
    assert AssetDagRunQueue.objects.count() == count


@pytest.mark.parametrize(("assets", "alias_events"), [(1, 1), (100, 1000)])
def test_statements_for_mixed_calls_are_the_fixed_plan(ti, assets, alias_events):
    asset_outlets, asset_events = declared_assets(assets)
    alias_outlets, alias_evts = alias_to_new_assets(alias_events)

    steps = count_statements(ti, asset_outlets + alias_outlets, asset_events + alias_evts)

    assert steps == FIXED_PLAN
    assert AssetEvent.objects.count() == assets + alias_events


def test_statements_when_aliases_are_missing_too(ti):
    # given: neither the alias nor the targets exist (a seed-format undeclared alias)
    events = [alias_event("fresh", f"n{n}", f"s3://n/{n}") for n in range(50)]

    # then: the same plan, and everything was created
    assert count_statements(ti, [alias_outlet("fresh")], events) == NEW_TARGETS_PLAN
    assert AssetAlias.objects.get().name == "fresh"
    assert AssetEvent.objects.count() == AssetAliasAsset.objects.count() == 50


def test_statements_when_some_targets_exist_read_only_those(ti):
    # given: alias events to 6 targets, 2 of which exist (with their own extra)
    outlets, events = alias_to_new_assets(6)
    for n in (1, 4):
        AssetFactory(name=f"new6_{n}", uri=f"s3://new/6/{n}", extra={"kept": n})

    # when
    result, sent = register_recording(ti, outlets, events)

    # then: the full plan, statement 3 reading the 2 existing targets only
    assert [statement_step(sql) for sql, _ in sent] == FIXED_PLAN
    (read,) = [params for sql, params in sent if statement_step(sql) == "SELECT asset"]
    assert sorted(row["name"] for row in json.loads(str(read[0]))) == ["new6_1", "new6_4"]
    # and every event is on its own target, new ones with dest_asset_extra, old ones as kept
    by_name = {event.asset.name: event.asset for event in result.events}
    assert sorted(by_name) == [f"new6_{n}" for n in range(6)]
    for n in range(6):
        asset, stored = by_name[f"new6_{n}"], Asset.objects.get(name=f"new6_{n}")
        assert asset.pk == stored.pk
        assert asset.extra == stored.extra == ({"kept": n} if n in (1, 4) else {"d": n})
        assert asset.group == stored.group


def test_rows_of_new_targets_are_inserted_without_a_conflict_check(ti):
    # given: alias events to 6 targets, 2 of which exist, linked to the alias and queued for
    # its consumer since an hour ago
    outlets, events = alias_to_new_assets(6)
    alias = AssetAlias.objects.get(name="alias_6")
    consumer = DagScheduleAssetAliasReference.objects.get(alias=alias).dag
    an_hour_ago = timezone.now() - timedelta(hours=1)
    existing = []
    for n in (1, 4):
        asset = AssetFactory(name=f"new6_{n}", uri=f"s3://new/6/{n}")
        AssetAliasAsset.objects.create(alias=alias, asset=asset)
        AssetDagRunQueue.objects.create(asset=asset, target_dag=consumer, created_at=an_hour_ago)
        existing.append(asset.pk)

    # when
    result, sent = register_recording(ti, outlets, events)

    # then: every target linked and queued once; the two queued before keep their wait
    new = sorted({event.asset_id for event in result.events} - set(existing))
    assert len(new) == 4
    linked = AssetAliasAsset.objects.filter(alias=alias).values_list("asset_id", flat=True)
    assert sorted(linked) == sorted(existing + new)
    waits = dict(
        AssetDagRunQueue.objects.filter(target_dag=consumer).values_list("asset_id", "created_at")
    )
    assert sorted(waits) == sorted(existing + new)
    assert [waits[pk] for pk in existing] == [an_hour_ago, an_hour_ago]
    assert all(waits[pk] > an_hour_ago for pk in new)
    assert sorted(result.queued) == sorted((pk, consumer.dag_id) for pk in existing + new)
    if connection.vendor != "postgresql":
        return
    # and on PostgreSQL the links and queue rows of the 4 targets statement 1 created are
    # inserted plainly, the 2 others checked (NOT EXISTS, ON CONFLICT)
    (text, params) = sent[-1]
    rows = [json.loads(p) for p in params if isinstance(p, str) and p.startswith("[")]
    links = [[r["asset_id"] for r in rs] for rs in rows if set(rs[0]) == {"alias_id", "asset_id"}]
    assert links == [existing, new]
    (emitted,) = [rs for rs in rows if "uri" in rs[0]]
    assert sorted(r["asset_id"] for r in emitted if r.get("fresh")) == new
    inserts = re.findall(r"\bINSERT INTO \"?(\w+)", text)
    assert inserts.count("asset_alias_asset") == inserts.count("asset_dag_run_queue") == 2
    assert text.count("ON CONFLICT") == 2  # the checked links, the queue's upsert


@pytest.mark.parametrize(
    ("outlets", "plan"),
    [
        pytest.param([alias_outlet("al")], [], id="alias-without-events"),
        pytest.param([asset_outlet("gone", "s3://gone")], ["SELECT asset"], id="unknown-asset"),
    ],
)
def test_statements_when_nothing_is_registered_are_only_the_lookups(ti, outlets, plan):
    assert count_statements(ti, outlets, []) == plan
    assert not AssetEvent.objects.exists()


def test_no_statement_without_declared_outlets(ti):
    events = [asset_event("a", "s3://a"), alias_event("al", "n", "s3://n")]

    assert count_statements(ti, [], events) == []


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's planner")
def test_existence_checks_probe_the_index_whatever_the_statistics(ti):
    # given: targets and links already stored, and statistics that count a tenth of their rows
    # (as when the tables grew faster than autovacuum analysed them: bench_http's alias1000)
    outlets, events = alias_to_new_assets(1000)
    register(ti, outlets, events)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE asset, asset_alias_asset")
        cursor.execute(
            "UPDATE pg_class SET reltuples = reltuples / 10"
            " WHERE relname IN ('asset', 'asset_alias_asset')"
        )

    # when: the same targets again, every statement explained as it runs
    with connection.cursor() as cursor:
        cursor.execute("LOAD 'auto_explain'")
        cursor.execute("SET LOCAL auto_explain.log_min_duration = 0")
        cursor.execute("SET LOCAL auto_explain.log_level = notice")
        cursor.execute("SET LOCAL client_min_messages = notice")
    plans: list[str] = []

    def keep(notice: Any) -> None:
        plans.append(notice.message_primary)

    connection.connection.add_notice_handler(keep)
    try:
        register(TaskInstanceFactory(dag_run=ti.dag_run, task_id="again"), outlets, events)
    finally:
        connection.connection.remove_notice_handler(keep)

    # then: no anti-join over a whole table: each target, alias and link is one index probe
    writes = [
        plan for plan in plans if "INSERT INTO asset " in plan or "asset_alias_asset " in plan
    ]
    assert len(writes) == 2, [plan[:300] for plan in plans]
    plan = "\n".join(
        line for plan in writes for line in plan.splitlines() if "Query Text" not in line
    )
    assert "Anti Join" not in plan, plan
    assert "Seq Scan on asset " not in plan, plan
    assert "Seq Scan on asset_alias_asset " not in plan, plan
    assert re.search(r"Index (Only )?Scan using \w+ on asset ", plan), plan
    assert re.search(r"Index (Only )?Scan using \w+ on asset_alias_asset ", plan), plan
