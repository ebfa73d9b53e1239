"""``assets_app.timetables`` against Airflow's own timetables, case by case.

Airflow 3.3's ``CronTriggerTimetable``, ``DeltaTriggerTimetable`` and ``OnceTimetable`` (the
installed ``apache-airflow-core``) are asked for the next run with their clock frozen
(``utcnow`` patched where they read it) and must agree with ``Timetable.next_run`` on every
case: around the DST changes of three timezones, with and without a last run, a start or an
end date, with catch-up on and off. A seeded table, so a failure names a case that repeats.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from unittest import mock

import pendulum
import pytest
from airflow.timetables import trigger as airflow_trigger
from airflow.timetables.base import DataInterval, TimeRestriction
from airflow.timetables.base import Timetable as AirflowTimetable
from airflow.timetables.simple import OnceTimetable
from airflow.timetables.trigger import CronTriggerTimetable, DeltaTriggerTimetable

from assets_app.timetables import Timetable, timetable_parse

CRONS = (
    "0 0 * * *",
    "0 3 * * *",
    "30 2 * * *",  # in the hour Europe/Berlin skips in March and repeats in October
    "0 * * * *",
    "30 * * * *",
    "*/15 * * * *",
    "0 */2 * * *",
    "15 1,2,3 * * *",
    "45 23 * * 1-5",
    "0 0 * * 0",
    "0 0 1 * *",
    "0 0 1 */3 *",
    "0 0 1 1 *",
)
TIMEZONES = ("UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata")
#: around DST days: Berlin's spring forward and fall back, New York's, and a plain day
AROUND = (
    datetime(2026, 3, 29, 0, 30, tzinfo=UTC),
    datetime(2026, 10, 25, 0, 30, tzinfo=UTC),
    datetime(2026, 3, 8, 6, 0, tzinfo=UTC),
    datetime(2026, 11, 1, 5, 0, tzinfo=UTC),
    datetime(2026, 6, 15, 12, 0, tzinfo=UTC),
)
CASES = 1500


@dataclass(frozen=True)
class Case:
    ours: Timetable
    theirs: AirflowTimetable
    last: datetime | None
    start: datetime | None
    end: datetime | None
    catchup: bool
    now: datetime

    def __str__(self) -> str:
        return (
            f"{self.ours.as_json()} last={self.last} start={self.start} end={self.end} "
            f"catchup={self.catchup} now={self.now}"
        )


def cases() -> Iterator[Case]:
    rng = random.Random(20260329)
    for _ in range(CASES):
        base = rng.choice(AROUND)

        def near(base: datetime = base) -> datetime:
            return base + timedelta(minutes=rng.randint(-3000, 3000))

        kind = rng.choice(("cron",) * 6 + ("delta", "once"))
        timezone = rng.choice(TIMEZONES)
        ours: Timetable
        theirs: AirflowTimetable
        last = rng.choice((None, near(), near()))
        if kind == "cron":
            cron = rng.choice(CRONS)
            ours = timetable_parse(schedule=cron, timezone=timezone)
            theirs = CronTriggerTimetable(cron, timezone=timezone)
            if last is not None:  # a real last run lies on the schedule
                last = on_schedule(ours, last)
        elif kind == "delta":
            delta = timedelta(minutes=rng.choice((5, 60, 360, 1440)))
            ours = timetable_parse(delta=delta.total_seconds(), timezone=timezone)
            theirs = DeltaTriggerTimetable(delta)
        else:
            ours, theirs = timetable_parse(schedule="@once", timezone=timezone), OnceTimetable()
        yield Case(
            ours=ours,
            theirs=theirs,
            last=last,
            start=rng.choice((None, near(), base - timedelta(days=40))),
            end=rng.choice((None, None, near())),
            catchup=rng.random() < 0.5,
            now=near(),
        )


def on_schedule(timetable: Timetable, at: datetime) -> datetime:
    """The schedule's first moment at or after ``at``."""
    info = timetable.next_run(
        last_run_after=None, start_date=at, end_date=None, catchup=True, now=at
    )
    assert info is not None
    return info.logical_date


def airflow_next(case: Case) -> datetime | None:
    """Airflow's next run (its ``run_after``, in UTC) with its clock frozen at ``case.now``."""
    now = pendulum.instance(case.now)

    def instance(at: datetime | None) -> pendulum.DateTime | None:
        return None if at is None else pendulum.instance(at)

    last = None
    if case.last is not None:
        last = DataInterval(pendulum.instance(case.last), pendulum.instance(case.last))
    restriction = TimeRestriction(instance(case.start), instance(case.end), case.catchup)
    with (
        mock.patch.object(airflow_trigger, "utcnow", return_value=now),
        mock.patch("airflow.timetables.simple.timezone.utcnow", return_value=now),
    ):
        info = case.theirs.next_dagrun_info(
            last_automated_data_interval=last, restriction=restriction
        )
    return None if info is None else info.run_after.astimezone(UTC)


def test_every_case_agrees_with_airflow() -> None:
    disagree = []
    for case in cases():
        info = case.ours.next_run(
            last_run_after=case.last,
            start_date=case.start,
            end_date=case.end,
            catchup=case.catchup,
            now=case.now,
        )
        ours = None if info is None else info.run_after
        if info is not None:
            # a trigger timetable's run is one instant: logical date = data interval = due
            assert info.logical_date == info.data_interval_start == info.data_interval_end == ours
        theirs = airflow_next(case)
        if ours != theirs:
            disagree.append(f"{case}: ours {ours}, Airflow's {theirs}")
    assert disagree == []


@pytest.mark.parametrize(
    ("cron", "timezone", "last", "expected"),
    [
        pytest.param(
            "30 2 * * *",
            "Europe/Berlin",
            datetime(2026, 3, 28, 1, 30, tzinfo=UTC),
            datetime(2026, 3, 29, 1, 30, tzinfo=UTC),
            id="skipped-wall-time-moves-forward",
        ),
        pytest.param(
            "30 2 * * *",
            "Europe/Berlin",
            datetime(2026, 10, 24, 0, 30, tzinfo=UTC),
            datetime(2026, 10, 25, 1, 30, tzinfo=UTC),
            id="repeated-wall-time-is-the-second",
        ),
        pytest.param(
            "0 * * * *",
            "Europe/Berlin",
            datetime(2026, 10, 25, 0, 0, tzinfo=UTC),
            datetime(2026, 10, 25, 1, 0, tzinfo=UTC),
            id="hourly-runs-the-repeated-hour",
        ),
        pytest.param(
            "0 * * * *",
            "America/New_York",
            datetime(2026, 3, 8, 6, 0, tzinfo=UTC),
            datetime(2026, 3, 8, 7, 0, tzinfo=UTC),
            id="hourly-over-the-gap-is-one-real-hour",
        ),
    ],
)
def test_dst_boundaries_match_airflow(
    cron: str, timezone: str, last: datetime, expected: datetime
) -> None:
    case = Case(
        ours=timetable_parse(schedule=cron, timezone=timezone),
        theirs=CronTriggerTimetable(cron, timezone=timezone),
        last=last,
        start=None,
        end=None,
        catchup=True,
        now=datetime(2027, 1, 1, tzinfo=UTC),
    )
    info = case.ours.next_run(
        last_run_after=last, start_date=None, end_date=None, catchup=True, now=case.now
    )
    assert info is not None
    assert info.run_after == airflow_next(case) == expected
