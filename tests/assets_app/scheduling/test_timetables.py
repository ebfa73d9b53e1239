"""Time schedules with a frozen clock: cron and presets (UTC and Europe/Berlin across its DST
days), timedeltas, @once, catch-up on and off, end dates and refused schedules."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from assets_app.timetables import DagRunInfo, timedelta_parse, timetable_parse


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


NOW = utc(2026, 3, 10, 15, 7)
START = utc(2026, 1, 1)


def test_daily_without_catchup_runs_only_the_latest_due_moment() -> None:
    daily = timetable_parse(schedule="@daily")
    first = daily.next_run(
        last_run_after=None, start_date=START, end_date=None, catchup=False, now=NOW
    )
    assert first == DagRunInfo.exact(utc(2026, 3, 10))
    # once that run exists, the next is tomorrow's: in the future, not yet due
    after = daily.next_run(
        last_run_after=utc(2026, 3, 10), start_date=START, end_date=None, catchup=False, now=NOW
    )
    assert after == DagRunInfo.exact(utc(2026, 3, 11))
    assert after.run_after > NOW


def test_daily_with_catchup_walks_from_the_start_date() -> None:
    daily = timetable_parse(schedule="0 0 * * *")
    kwargs: dict[str, Any] = {"start_date": START, "end_date": None, "catchup": True, "now": NOW}
    first = daily.next_run(last_run_after=None, **kwargs)
    assert first is not None
    assert first.logical_date == START
    assert first.data_interval_start == first.data_interval_end == first.run_after == START
    second = daily.next_run(last_run_after=START, **kwargs)
    assert second == DagRunInfo.exact(utc(2026, 1, 2))


def test_a_start_date_between_moments_aligns_to_the_next() -> None:
    hourly = timetable_parse(schedule="@hourly")
    info = hourly.next_run(
        last_run_after=None,
        start_date=utc(2026, 3, 10, 15, 30),
        end_date=None,
        catchup=False,
        now=NOW,
    )
    assert info == DagRunInfo.exact(utc(2026, 3, 10, 16))


@pytest.mark.parametrize(
    ("last", "expected"),
    [
        # spring forward (29 March 2026): 03:00 CET is 02:00 UTC, 03:00 CEST is 01:00 UTC
        (utc(2026, 3, 28, 2), utc(2026, 3, 29, 1)),
        (utc(2026, 3, 29, 1), utc(2026, 3, 30, 1)),
        # fall back (25 October 2026): 03:00 CEST is 01:00 UTC, 03:00 CET 02:00 UTC
        (utc(2026, 10, 24, 1), utc(2026, 10, 25, 2)),
    ],
)
def test_cron_keeps_local_wall_time_across_dst(last: datetime, expected: datetime) -> None:
    berlin = timetable_parse(schedule="0 3 * * *", timezone="Europe/Berlin")
    info = berlin.next_run(
        last_run_after=last, start_date=None, end_date=None, catchup=True, now=utc(2027, 1, 1)
    )
    assert info == DagRunInfo.exact(expected)


def test_hourly_steps_one_real_hour_over_the_dst_gap() -> None:
    berlin = timetable_parse(schedule="@hourly", timezone="Europe/Berlin")
    # 01:00 CET (00:00 UTC) -> the next hour is 03:00 CEST (01:00 UTC): no lost or doubled run
    info = berlin.next_run(
        last_run_after=utc(2026, 3, 29, 0),
        start_date=None,
        end_date=None,
        catchup=True,
        now=utc(2027, 1, 1),
    )
    assert info == DagRunInfo.exact(utc(2026, 3, 29, 1))


def test_daily_in_a_timezone_is_due_at_local_midnight() -> None:
    berlin = timetable_parse(schedule="@daily", timezone="Europe/Berlin")
    kwargs: dict[str, Any] = {"last_run_after": None, "start_date": None, "end_date": None}
    # without a start date or a run, 16 h after local midnight is too late (more than a tenth
    # of a day): the first run waits for the next midnight, 11 March 00:00 CET
    late = berlin.next_run(catchup=False, now=NOW, **kwargs)
    assert late == DagRunInfo.exact(utc(2026, 3, 10, 23))
    # two hours after it (under 2.4 h) it still runs the one just passed, 10 March 00:00 CET
    early = berlin.next_run(catchup=True, now=utc(2026, 3, 10, 1), **kwargs)
    assert early == DagRunInfo.exact(utc(2026, 3, 9, 23))


def test_ambiguous_and_missing_wall_times_fall_where_airflow_puts_them() -> None:
    berlin = timetable_parse(schedule="30 2 * * *", timezone="Europe/Berlin")
    kwargs: dict[str, Any] = {"start_date": None, "end_date": None, "catchup": True}
    # 02:30 does not exist on 29 March: moved forward by the gap, 03:30 CEST (01:30 UTC)
    spring = berlin.next_run(last_run_after=utc(2026, 3, 28, 1, 30), now=NOW, **kwargs)
    assert spring == DagRunInfo.exact(utc(2026, 3, 29, 1, 30))
    # 02:30 happens twice on 25 October: the second one, 02:30 CET (01:30 UTC)
    autumn = berlin.next_run(last_run_after=utc(2026, 10, 24, 0, 30), now=NOW, **kwargs)
    assert autumn == DagRunInfo.exact(utc(2026, 10, 25, 1, 30))


def test_hourly_counts_the_repeated_hour_when_dst_ends() -> None:
    berlin = timetable_parse(schedule="@hourly", timezone="Europe/Berlin")
    kwargs: dict[str, Any] = {"start_date": None, "end_date": None, "catchup": True, "now": NOW}
    # 02:00 CEST (00:00 UTC) -> 02:00 CET (01:00 UTC) -> 03:00 CET (02:00 UTC)
    first = berlin.next_run(last_run_after=utc(2026, 10, 25, 0), **kwargs)
    assert first == DagRunInfo.exact(utc(2026, 10, 25, 1))
    second = berlin.next_run(last_run_after=first.run_after, **kwargs)
    assert second == DagRunInfo.exact(utc(2026, 10, 25, 2))


def test_timedelta_without_catchup_runs_now_after_a_long_pause() -> None:
    every_6h = timetable_parse(delta="6:00:00")
    kwargs: dict[str, Any] = {"start_date": START, "end_date": None, "now": NOW}
    late = every_6h.next_run(last_run_after=NOW - timedelta(days=1), catchup=False, **kwargs)
    assert late == DagRunInfo.exact(NOW)
    caught_up = every_6h.next_run(last_run_after=NOW - timedelta(days=1), catchup=True, **kwargs)
    assert caught_up == DagRunInfo.exact(NOW - timedelta(hours=18))
    recent = every_6h.next_run(last_run_after=NOW, catchup=False, **kwargs)
    assert recent == DagRunInfo.exact(NOW + timedelta(hours=6))


def test_once_runs_at_the_start_date_then_never() -> None:
    once = timetable_parse(schedule="@once")
    assert once.next_run(
        last_run_after=None, start_date=START, end_date=None, catchup=False, now=NOW
    ) == DagRunInfo.exact(START)
    assert once.next_run(
        last_run_after=None, start_date=None, end_date=None, catchup=False, now=NOW
    ) == DagRunInfo.exact(NOW)
    assert (
        once.next_run(last_run_after=START, start_date=START, end_date=None, catchup=False, now=NOW)
        is None
    )


def test_nothing_after_the_end_date() -> None:
    daily = timetable_parse(schedule="@daily")
    end = utc(2026, 1, 2, 12)
    kwargs: dict[str, Any] = {"start_date": START, "end_date": end, "catchup": True, "now": NOW}
    assert daily.next_run(last_run_after=utc(2026, 1, 1), **kwargs) == DagRunInfo.exact(
        utc(2026, 1, 2)
    )
    assert daily.next_run(last_run_after=utc(2026, 1, 2), **kwargs) is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"schedule": "@fortnightly"}, "unknown preset '@fortnightly'"),
        ({"schedule": "61 * * * *"}, "'61 \\* \\* \\* \\*' is not a valid cron expression"),
        ({"schedule": "every day"}, "not a valid cron expression"),
        ({"delta": "soon"}, "'soon' is not a timedelta"),
        ({"delta": 0}, "must be positive"),
        ({"schedule": "@daily", "timezone": "Mars/Olympus"}, "unknown timezone 'Mars/Olympus'"),
        ({}, "exactly one of"),
        ({"schedule": "@daily", "delta": 60}, "exactly one of"),
    ],
)
def test_bad_schedules_are_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        timetable_parse(**kwargs)


def test_timedelta_forms() -> None:
    assert timedelta_parse(90) == timedelta(seconds=90)
    assert timedelta_parse("1 day, 2:00:00") == timedelta(days=1, hours=2)
    assert timedelta_parse("3 days, 0:00:30") == timedelta(days=3, seconds=30)
    with pytest.raises(ValueError, match="not a timedelta"):
        timedelta_parse(True)  # a bool is refused, not read as 1 second


@pytest.mark.parametrize(
    ("schedule", "delta", "zone", "words"),
    [
        pytest.param("@daily", None, "UTC", "At 00:00", id="preset"),
        pytest.param("*/15 * * * *", None, "UTC", "Every 15 minutes", id="every-15-min"),
        pytest.param(
            "0 6 * * 1-5",
            None,
            "Europe/Berlin",
            "At 06:00, Monday through Friday (Europe/Berlin)",
            id="weekdays-in-a-zone",
        ),
        pytest.param(
            "0 2 1 * 1",
            None,
            "UTC",
            "At 02:00, on day 1 of the month (or) At 02:00, only on Monday",
            id="day-of-month-or-week",
        ),
        pytest.param(None, 5400, "UTC", "Every 1 hour, 30 minutes", id="timedelta"),
        pytest.param("@once", None, "UTC", "Once, as soon as possible", id="once"),
    ],
)
def test_a_schedule_in_words_as_airflow_says_it(schedule, delta, zone, words) -> None:
    assert timetable_parse(schedule=schedule, delta=delta, timezone=zone).description == words
