"""Time-scheduled runs with a frozen clock (``now=``): the cursor a declaration computes, runs
created at cron boundaries (UTC, Europe/Berlin's DST days), @once, timedeltas, catch-up on
and off, start and end dates, max_active_runs, paused and stale DAGs, moments taken by manual
runs, AssetOrTimeSchedule's time half, the statements per batch, and ``manage.py scheduler``."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from assets_app.models import Dag, DagRun, DagRunState, DagRunType, TaskInstance
from assets_app.services.dags.declare import dags_declare, dags_set_paused
from assets_app.services.dags.manifest import manifest_parse
from assets_app.services.runs.dag_runs import dag_run_trigger
from assets_app.services.scheduling.time_schedules import (
    dags_next_run_refresh,
    dags_time_scheduled_runs_create,
)
from runtime.management.commands.scheduler import Command as SchedulerCommand
from tests.factories import DagRunFactory

pytestmark = pytest.mark.django_db


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


def scheduled_run_id(logical_date: datetime) -> str:
    return DagRun.generate_run_id(run_type=DagRunType.SCHEDULED, logical_date=logical_date)


NOW = utc(2026, 3, 10, 15, 7)
TASKS = [{"task_id": "extract"}, {"task_id": "load", "upstream": ["extract"]}]


def declare(*dags: dict[str, Any], now: datetime = NOW) -> None:
    """Declare ``dags`` as if at ``now``: the declaration's cursor is computed again with the
    frozen clock (a declaration reads the real one)."""
    manifest = {"dags": [{"tasks": TASKS, **dag} for dag in dags]}
    dags_declare(manifest=manifest_parse(manifest), fileloc="time.yaml")
    dags_next_run_refresh(dag_ids=[dag["dag_id"] for dag in dags], now=now)


def cursor(dag_id: str) -> tuple[datetime | None, datetime | None]:
    dag = Dag.objects.get(dag_id=dag_id)
    return dag.next_dagrun, dag.next_dagrun_create_after


def run_ids(dag_id: str) -> list[str]:
    return list(
        DagRun.objects.filter(dag_id=dag_id, run_type=DagRunType.SCHEDULED)
        .order_by("logical_date")
        .values_list("run_id", flat=True)
    )


def create(now: datetime) -> list[str]:
    """One scheduler pass's time half at ``now``: the ``dag_id/run_id`` it created."""
    return [f"{r.dag_id}/{r.run_id}" for r in dags_time_scheduled_runs_create(now=now).created]


def finish(dag_id: str) -> None:
    """Every active run of the DAG ends (as its leaves would settle it)."""
    DagRun.objects.filter(dag_id=dag_id, state__in=("queued", "running")).update(state="success")


# --- the cursor ----------------------------------------------------------------------------


def test_declaring_sets_the_next_run_from_the_schedule():
    # given / when
    declare(
        {"dag_id": "caught_up", "schedule": "@daily", "start_date": "2026-01-01", "catchup": True},
        {"dag_id": "latest", "schedule": "@daily", "start_date": "2026-01-01"},
        {"dag_id": "future", "schedule": "@daily", "start_date": "2026-04-01T06:00:00Z"},
        {
            "dag_id": "over",
            "schedule": "@daily",
            "start_date": "2026-01-01",
            "end_date": "2026-02-01",
        },
        {"dag_id": "manual_only"},
        {"dag_id": "on_asset", "schedule": {"asset": {"uri": "s3://b/x"}}},
    )

    # then: catch-up starts at the start date; without it, the latest due moment runs
    assert cursor("caught_up") == (utc(2026, 1, 1), utc(2026, 1, 1))
    assert cursor("latest") == (utc(2026, 3, 10), utc(2026, 3, 10))
    # a start date between moments waits for the next one
    assert cursor("future") == (utc(2026, 4, 2), utc(2026, 4, 2))
    # the end date passed, or no time schedule: no next run
    assert cursor("over") == (None, None)
    assert cursor("manual_only") == (None, None)
    assert cursor("on_asset") == (None, None)


def test_declaring_again_continues_from_the_last_scheduled_run():
    # given runs created up to 3 January
    spec = {"dag_id": "nightly", "schedule": "@daily", "start_date": "2026-01-01", "catchup": True}
    declare({**spec, "max_active_runs": 3})
    assert len(create(NOW)) == 3

    # when the same DAG is declared again (with room now)
    declare({**spec, "max_active_runs": 16})

    # then it goes on with 4 January: nothing created twice, nothing skipped
    assert cursor("nightly") == (utc(2026, 1, 4), utc(2026, 1, 4))
    finish("nightly")
    create(NOW)
    assert run_ids("nightly")[:5] == [scheduled_run_id(utc(2026, 1, day)) for day in range(1, 6)]
    assert len(set(run_ids("nightly"))) == len(run_ids("nightly"))


# --- cron boundaries ------------------------------------------------------------------------


def test_a_run_is_created_at_its_cron_moment_not_a_microsecond_before_and_only_once():
    # given a daily DAG whose run of 10 March exists
    declare({"dag_id": "nightly", "schedule": "0 0 * * *", "start_date": "2026-01-01"})
    assert create(NOW) == ["nightly/scheduled__2026-03-10T00:00:00+00:00"]
    midnight = utc(2026, 3, 11)

    # when the clock reaches the next midnight, then that run is created, once
    assert create(midnight - timedelta(microseconds=1)) == []
    assert create(midnight) == ["nightly/scheduled__2026-03-11T00:00:00+00:00"]
    assert create(midnight) == []
    assert create(midnight + timedelta(hours=23, minutes=59)) == []

    # and it is Airflow's scheduled run: logical date = data interval = run_after = the moment
    run = DagRun.objects.get(dag_id="nightly", run_id="scheduled__2026-03-11T00:00:00+00:00")
    assert run.run_type == DagRunType.SCHEDULED
    assert run.logical_date == run.data_interval_start == run.data_interval_end == midnight
    assert run.run_after == midnight
    assert cursor("nightly") == (utc(2026, 3, 12), utc(2026, 3, 12))


def test_a_new_run_starts_its_first_tasks():
    # given / when
    declare({"dag_id": "nightly", "schedule": "@daily", "start_date": "2026-01-01"})
    [created] = dags_time_scheduled_runs_create(now=NOW).created

    # then the run is admitted with its task instances, the first one scheduled
    assert created.state == DagRunState.RUNNING
    assert created.task_ids == ("extract", "load")
    states = dict(
        TaskInstance.objects.filter(dag_run_id=created.dag_run_pk).values_list("task_id", "state")
    )
    assert states == {"extract": "scheduled", "load": None}


@pytest.mark.parametrize(
    ("start", "end", "expected"),
    [
        pytest.param(
            # Europe/Berlin springs forward on 29 March: 02:30 does not exist that day, the run
            # moves on by the gap to 03:30 CEST (01:30 UTC); the other days are CET then CEST
            "2026-03-27T00:00:00Z",
            "2026-03-30T12:00:00Z",
            ["2026-03-27T01:30", "2026-03-28T01:30", "2026-03-29T01:30", "2026-03-30T00:30"],
            id="spring-forward",
        ),
        pytest.param(
            # it falls back on 25 October: 02:30 happens twice, the run is at the second one,
            # 02:30 CET (01:30 UTC); the day before is CEST (00:30 UTC)
            "2026-10-23T12:00:00Z",
            "2026-10-26T12:00:00Z",
            ["2026-10-24T00:30", "2026-10-25T01:30", "2026-10-26T01:30"],
            id="fall-back",
        ),
    ],
)
def test_a_local_cron_across_a_dst_day(start: str, end: str, expected: list[str]):
    # given a 02:30 Europe/Berlin schedule with catch-up over the DST day
    declare(
        {
            "dag_id": "berlin",
            "schedule": "30 2 * * *",
            "timezone": "Europe/Berlin",
            "start_date": start,
            "end_date": end,
            "catchup": True,
        }
    )

    # when a pass runs long after, then each local day has its one run
    create(utc(2026, 12, 1))
    assert run_ids("berlin") == [f"scheduled__{at}:00+00:00" for at in expected]
    assert cursor("berlin") == (None, None)  # past the end date


@pytest.mark.parametrize(
    ("day", "hours"),
    [
        pytest.param(utc(2026, 3, 28, 23), 23, id="spring-forward-day-has-23-hours"),
        pytest.param(utc(2026, 10, 24, 22), 25, id="fall-back-day-has-25-hours"),
    ],
)
def test_hourly_runs_over_a_berlin_dst_day(day: datetime, hours: int):
    # given an hourly Europe/Berlin schedule over one local day (its midnight is ``day``)
    declare(
        {
            "dag_id": "hourly",
            "schedule": "@hourly",
            "timezone": "Europe/Berlin",
            "start_date": day.isoformat(),
            "end_date": (day + timedelta(hours=hours) - timedelta(seconds=1)).isoformat(),
            "catchup": True,
            "max_active_runs": 30,
        }
    )

    # when / then: one run per real hour, none lost in the gap, none doubled in the fold
    create(utc(2026, 12, 1))
    assert run_ids("hourly") == [scheduled_run_id(day + timedelta(hours=n)) for n in range(hours)]


# --- @once, timedeltas, catch-up ------------------------------------------------------------


def test_once_runs_at_its_start_date_then_never_again():
    # given
    declare({"dag_id": "once", "schedule": "@once", "start_date": "2026-03-01T08:00:00Z"})

    # when / then
    assert create(NOW) == ["once/scheduled__2026-03-01T08:00:00+00:00"]
    assert cursor("once") == (None, None)
    finish("once")
    assert create(NOW + timedelta(days=365)) == []
    declare({"dag_id": "once", "schedule": "@once", "start_date": "2026-03-01T08:00:00Z"})
    assert cursor("once") == (None, None)  # declaring again does not bring it back


def test_timedelta_schedule_with_and_without_catchup():
    # given two 6-hour schedules from 9 March 00:00, one catching up
    every_6h = {"schedule": {"timedelta": 6 * 3600}, "start_date": "2026-03-09T00:00:00Z"}
    declare({"dag_id": "caught_up", **every_6h, "catchup": True}, {"dag_id": "latest", **every_6h})

    # when a pass runs at 10 March 15:07
    created = create(NOW)

    # then the catching-up one runs every 6 hours since the start (7 due moments)
    assert [r for r in created if r.startswith("caught_up/")] == [
        f"caught_up/{scheduled_run_id(utc(2026, 3, 9) + timedelta(hours=6 * n))}" for n in range(7)
    ]
    assert cursor("caught_up")[0] == utc(2026, 3, 10, 18)
    # the other ran at declaration time (no run before, no catch-up: now), then waits 6 hours
    assert [r for r in created if r.startswith("latest/")] == [f"latest/{scheduled_run_id(NOW)}"]
    assert cursor("latest")[0] == NOW + timedelta(hours=6)


def test_without_catchup_a_long_gap_runs_only_the_latest_moment():
    # given a daily DAG that ran on 10 March
    declare({"dag_id": "nightly", "schedule": "@daily", "start_date": "2026-01-01"})
    create(NOW)
    finish("nightly")

    # when no scheduler ran for ten days
    later = utc(2026, 3, 20, 9)

    # then one run, the latest due (20 March), and none of the nine in between
    assert create(later) == ["nightly/scheduled__2026-03-20T00:00:00+00:00"]
    assert create(later) == []
    assert cursor("nightly")[0] == utc(2026, 3, 21)


def test_catchup_creates_every_missed_moment_in_order_up_to_max_active_runs():
    # given a daily DAG from 1 January with catch-up, at most 3 active runs
    declare(
        {
            "dag_id": "backlog",
            "schedule": "@daily",
            "start_date": "2026-01-01",
            "catchup": True,
            "max_active_runs": 3,
        }
    )

    # when / then: three runs, oldest first, then nothing while they are active
    assert create(NOW) == [f"backlog/{scheduled_run_id(utc(2026, 1, d))}" for d in (1, 2, 3)]
    assert create(NOW) == []
    assert cursor("backlog")[0] == utc(2026, 1, 4)

    # one ends: the next moment follows at the next pass
    DagRun.objects.filter(dag_id="backlog", run_id=scheduled_run_id(utc(2026, 1, 1))).update(
        state="failed"
    )
    assert create(NOW) == [f"backlog/{scheduled_run_id(utc(2026, 1, 4))}"]

    # and so on until 10 March, each moment once
    for _ in range(100):
        finish("backlog")
        if not create(NOW):
            break
    assert run_ids("backlog") == [
        scheduled_run_id(utc(2026, 1, 1) + timedelta(days=n)) for n in range(31 + 28 + 10)
    ]


def test_queued_and_running_runs_of_any_kind_count_against_max_active_runs():
    # given a DAG at max_active_runs 2 with a manual run running and an asset-triggered one
    # queued
    declare({"dag_id": "capped", "schedule": "@daily", "max_active_runs": 2})
    dag = Dag.objects.get(dag_id="capped")
    DagRunFactory(dag=dag, run_type=DagRunType.MANUAL, state=DagRunState.RUNNING)
    DagRunFactory(dag=dag, run_type=DagRunType.ASSET_TRIGGERED, state=DagRunState.QUEUED)
    dags_next_run_refresh(dag_ids=["capped"], now=utc(2026, 3, 10, 0, 1))

    # when / then: no scheduled run while both are active, one as soon as one ends
    assert create(utc(2026, 3, 10, 0, 2)) == []
    DagRun.objects.filter(dag_id="capped", run_type=DagRunType.MANUAL).update(state="success")
    assert create(utc(2026, 3, 10, 0, 3)) == ["capped/scheduled__2026-03-10T00:00:00+00:00"]


def test_start_and_end_dates_bound_the_runs():
    # given a DAG from 12 March 06:00 to 14 March 12:00
    declare(
        {
            "dag_id": "bounded",
            "schedule": "@daily",
            "start_date": "2026-03-12T06:00:00Z",
            "end_date": "2026-03-14T12:00:00Z",
        }
    )

    # when / then: nothing before the first moment after the start, none after the end
    assert create(NOW) == []
    assert create(utc(2026, 3, 13)) == ["bounded/scheduled__2026-03-13T00:00:00+00:00"]
    assert create(utc(2026, 3, 14)) == ["bounded/scheduled__2026-03-14T00:00:00+00:00"]
    assert cursor("bounded") == (None, None)
    assert create(utc(2026, 3, 20)) == []


# --- paused, stale, taken moments -----------------------------------------------------------


@pytest.mark.parametrize(("catchup", "expected_runs"), [(False, 1), (True, 11)])
def test_a_paused_dag_gets_no_run_and_on_unpause_catches_up_only_if_asked(
    catchup: bool, expected_runs: int
):
    # given a daily DAG paused after its run of 10 March
    declare(
        {
            "dag_id": "nightly",
            "schedule": "@daily",
            "start_date": "2026-03-10",
            "catchup": catchup,
        },
        now=utc(2026, 3, 10, 0, 1),
    )
    assert create(utc(2026, 3, 10, 0, 1)) == ["nightly/scheduled__2026-03-10T00:00:00+00:00"]
    finish("nightly")
    dags_set_paused(dag_ids=["nightly"], is_paused=True)

    # when ten days pass while paused, then nothing runs
    for day in range(11, 21):
        assert create(utc(2026, 3, day, 1)) == []

    # when unpaused on 21 March: the backlog with catch-up, else only the latest moment
    dags_set_paused(dag_ids=["nightly"], is_paused=False)
    created = create(utc(2026, 3, 21, 1))
    assert created == [
        f"nightly/{scheduled_run_id(utc(2026, 3, day))}" for day in range(22 - expected_runs, 22)
    ]


def test_a_stale_dag_gets_no_run():
    # given a DAG gone from its manifest
    declare({"dag_id": "gone", "schedule": "@daily", "start_date": "2026-01-01"})
    dags_declare(manifest=manifest_parse({"dags": []}), fileloc="time.yaml")
    assert Dag.objects.get(dag_id="gone").is_stale

    # when / then
    assert create(NOW) == []


def test_a_moment_a_manual_run_holds_is_skipped():
    # given a manual run with the logical date the next scheduled run would have
    declare(
        {
            "dag_id": "nightly",
            "schedule": "@daily",
            "start_date": "2026-01-01",
            "catchup": True,
            "max_active_runs": 3,
        }
    )
    dag_run_trigger(dag_id="nightly", logical_date=utc(2026, 1, 2))

    # when / then: that moment is passed over, the others are created
    result = dags_time_scheduled_runs_create(now=NOW)
    assert [r.run_id for r in result.created] == [scheduled_run_id(utc(2026, 1, 1))]
    assert result.taken == [("nightly", scheduled_run_id(utc(2026, 1, 2)))]
    assert cursor("nightly")[0] == utc(2026, 1, 3)


def test_asset_or_time_runs_on_time_and_asset_runs_do_not_move_the_cursor():
    # given an asset-or-time DAG that had an asset-triggered run
    declare(
        {
            "dag_id": "either",
            "schedule": {
                "asset_or_time": {"assets": {"asset": {"uri": "s3://b/x"}}, "time": "@daily"}
            },
            "start_date": "2026-01-01",
        }
    )
    DagRunFactory(
        dag=Dag.objects.get(dag_id="either"),
        run_type=DagRunType.ASSET_TRIGGERED,
        run_id="asset_triggered__2026-03-10T09:00:00+00:00_abcdefgh",
        state=DagRunState.SUCCESS,
    )
    dags_next_run_refresh(dag_ids=["either"], now=NOW)

    # when / then: its time half runs as a scheduled run, the asset run notwithstanding
    assert create(NOW) == ["either/scheduled__2026-03-10T00:00:00+00:00"]
    assert cursor("either")[0] == utc(2026, 3, 11)


# --- statements ------------------------------------------------------------------------------


def test_statements_per_batch_do_not_grow_with_its_dags_or_runs():
    def one_pass(count: int, prefix: str) -> int:
        declare(
            *(
                {
                    "dag_id": f"{prefix}{i}",
                    "schedule": "@daily",
                    "start_date": "2026-03-01",
                    "catchup": True,
                }
                for i in range(count)
            )
        )
        with CaptureQueriesContext(connection) as queries:
            created = create(NOW)
        assert len(created) == count * 10  # 1 to 10 March
        Dag.objects.filter(dag_id__startswith=prefix).update(is_paused=True)
        return len(queries)

    # one batch: lock the due DAGs, read their room (runs.admit.dags_room), look up the taken
    # moments, dag_runs_insert (insert the runs, read the tasks, insert the task
    # instances; + NOTIFY on PostgreSQL), move the cursors; + the savepoint and its release
    one = one_pass(1, "one_")
    assert one == 7 + (connection.vendor == "postgresql") + 2
    assert one_pass(40, "many_") == one


# --- the command -----------------------------------------------------------------------------


def test_scheduler_command_reports_the_time_scheduled_runs():
    # given a DAG whose three runs are long due
    declare(
        {
            "dag_id": "nightly",
            "schedule": "@daily",
            "start_date": "2026-01-01",
            "end_date": "2026-01-03",
            "catchup": True,
        }
    )

    # when
    out = io.StringIO()
    call_command("scheduler", "--once", stdout=out, stderr=io.StringIO())

    # then
    lines = out.getvalue().splitlines()
    assert [line for line in lines if line.startswith("created ")] == [
        f"created nightly scheduled__2026-01-0{day}T00:00:00+00:00 (time)" for day in (1, 2, 3)
    ]
    assert lines[-1] == "scheduler stopped after 1 pass(es), 3 run(s)"


def test_scheduler_help_tells_of_time_schedules():
    parser = SchedulerCommand().create_parser("manage.py", "scheduler")
    text = " ".join(parser.format_help().split())
    assert "create the scheduled runs of time-scheduled DAGs" in text
    assert "catching up missed ones only for DAGs with catchup, up to max_active_runs" in text


def test_an_unreadable_timetable_schedules_nothing_and_stops_no_other_dag(caplog):
    # given two due DAGs, one with a timetable no schedule reads
    declare(
        {"dag_id": "broken", "schedule": "@daily", "start_date": "2026-01-01"},
        {"dag_id": "fine", "schedule": "@daily", "start_date": "2026-01-01"},
    )
    Dag.objects.filter(dag_id="broken").update(timetable={"hourly": True})

    # when / then: the other runs, the broken one is logged and not due any more
    assert create(NOW) == ["fine/scheduled__2026-03-10T00:00:00+00:00"]
    assert cursor("broken") == (None, None)
    assert "DAG broken has an unreadable timetable" in caplog.text
