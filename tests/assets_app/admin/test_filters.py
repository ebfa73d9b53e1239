"""assets_app.admin.filters: filters declared in one line keep their URL keys; typos fail early."""

from __future__ import annotations

import pytest

from assets_app.admin.filters import (
    AssetActiveFilter,
    DagIdFilter,
    EventSourceFilter,
    HasScheduleFilter,
    PresenceFilter,
    SourceDagFilter,
    TargetDagFilter,
)


def test_declared_filters_keep_their_field_title_and_url_key():
    assert [
        (f.field_path, f.title, f.parameter_name)
        for f in (SourceDagFilter, TargetDagFilter, AssetActiveFilter, HasScheduleFilter)
    ] == [
        ("source_dag_id", "source DAG", "source_dag"),
        ("target_dag_id", "target DAG", "target_dag"),
        ("active", "active", "active"),
        ("asset_expression", "asset schedule", "scheduled"),
    ]
    assert issubclass(SourceDagFilter, DagIdFilter)
    assert (EventSourceFilter.present, EventSourceFilter.absent) == (
        ("task", "a task"),
        ("manual", "manual (no task)"),
    )


def test_declaring_a_filter_with_an_unknown_attribute_fails():
    with pytest.raises(TypeError, match="no attribute presnt"):
        PresenceFilter.on("active", title="active", parameter_name="active", presnt=("y", "Y"))
