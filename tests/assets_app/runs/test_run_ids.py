"""Run ids have one home (``DagRun.generate_run_id``, ``DagRunType.from_run_id``): the format
of each type's id, the parse of any id back to its type (odd ones included), and both held
to Airflow 3.3's own ``DagRunType`` (the installed ``apache-airflow-core``)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

import pytest
from airflow.utils.types import DagRunType as AirflowDagRunType

from assets_app.models import DagRun, DagRunType

AT = datetime(2026, 1, 1, tzinfo=UTC)
BERLIN = timezone(timedelta(hours=1))


@pytest.mark.parametrize(
    ("run_type", "logical_date", "expected"),
    [
        pytest.param(DagRunType.MANUAL, AT, "manual__2026-01-01T00:00:00+00:00", id="manual"),
        pytest.param(
            DagRunType.SCHEDULED, AT, "scheduled__2026-01-01T00:00:00+00:00", id="scheduled"
        ),
        pytest.param(DagRunType.BACKFILL, AT, "backfill__2026-01-01T00:00:00+00:00", id="backfill"),
        pytest.param(
            DagRunType.MANUAL,
            datetime(2026, 3, 29, 2, 30, 0, 123456, tzinfo=BERLIN),
            "manual__2026-03-29T02:30:00.123456+01:00",
            id="microseconds-and-an-offset-kept",
        ),
    ],
)
def test_a_run_with_a_logical_date_is_named_by_it(run_type, logical_date, expected):
    # when
    run_id = DagRun.generate_run_id(
        run_type=run_type, logical_date=logical_date, run_after=AT + timedelta(days=3)
    )

    # then: the logical date, not run_after
    assert run_id == expected


def test_a_run_without_a_logical_date_is_named_by_run_after_and_eight_random_characters():
    # when
    ids = {
        DagRun.generate_run_id(run_type=DagRunType.ASSET_TRIGGERED, logical_date=None, run_after=AT)
        for _ in range(20)
    }

    # then
    assert all(
        re.fullmatch(r"asset_triggered__2026-01-01T00:00:00\+00:00_[A-Za-z0-9]{8}", run_id)
        for run_id in ids
    ), ids
    assert len(ids) == 20  # 62**8 suffixes: two alike would be a broken random source


def test_fixed_characters_make_an_id_that_repeats():
    run_id = DagRun.generate_run_id(
        run_type=DagRunType.ASSET_TRIGGERED, logical_date=None, run_after=AT, unique="AbC12xYz"
    )

    assert run_id == "asset_triggered__2026-01-01T00:00:00+00:00_AbC12xYz"


def test_an_id_needs_a_logical_date_or_run_after():
    with pytest.raises(ValueError, match="run_after"):
        DagRun.generate_run_id(run_type=DagRunType.ASSET_TRIGGERED, logical_date=None)


@pytest.mark.parametrize("run_type", list(DagRunType))
@pytest.mark.parametrize("logical_date", [AT, None], ids=["logical-date", "no-logical-date"])
def test_every_generated_id_parses_back_to_its_type(run_type, logical_date):
    run_id = DagRun.generate_run_id(run_type=run_type, logical_date=logical_date, run_after=AT)

    assert DagRunType.from_run_id(run_id) is run_type


ODD_IDS = [
    pytest.param("manual__a__b", DagRunType.MANUAL, id="manual-with-a-second-separator"),
    pytest.param("scheduled__2026__x", DagRunType.SCHEDULED, id="scheduled-with-a-second"),
    pytest.param("asset_triggered__x__y", DagRunType.ASSET_TRIGGERED, id="asset-with-a-second"),
    pytest.param("scheduled___x", DagRunType.SCHEDULED, id="three-underscores"),
    pytest.param("backfill__", DagRunType.BACKFILL, id="nothing-after-the-separator"),
    pytest.param("my_run", DagRunType.MANUAL, id="no-separator"),
    pytest.param("scheduled", DagRunType.MANUAL, id="a-type-alone"),
    pytest.param("asset_triggered_x", DagRunType.MANUAL, id="one-underscore"),
    pytest.param("__scheduled", DagRunType.MANUAL, id="separator-first"),
    pytest.param("Scheduled__x", DagRunType.MANUAL, id="another-case"),
    pytest.param("bench__x", DagRunType.MANUAL, id="an-unknown-prefix"),
    pytest.param("manual__scheduled__x", DagRunType.MANUAL, id="the-first-prefix-counts"),
    pytest.param("", DagRunType.MANUAL, id="empty"),
]


@pytest.mark.parametrize(("run_id", "expected"), ODD_IDS)
def test_any_id_parses_to_the_type_it_starts_with_else_manual(run_id, expected):
    assert DagRunType.from_run_id(run_id) is expected


@pytest.mark.parametrize(("run_id", "expected"), ODD_IDS)
def test_the_parse_agrees_with_airflow(run_id, expected):
    # Airflow knows types the registry has not (operator_triggered …): those read as manual
    theirs = AirflowDagRunType.from_run_id(run_id).value
    assert DagRunType.from_run_id(run_id) == (
        theirs if theirs in DagRunType.values else DagRunType.MANUAL
    )


@pytest.mark.parametrize("run_type", list(DagRunType))
def test_the_type_prefix_is_airflows(run_type):
    assert run_type.generate_run_id(suffix="x") == AirflowDagRunType(
        run_type.value
    ).generate_run_id(suffix="x")
