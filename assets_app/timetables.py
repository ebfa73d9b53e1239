"""Time schedules: when is a DAG's next run due (a pure module, no database, no clock).

What Airflow 3.3 does for ``schedule=`` strings and timedeltas (``create_cron_data_intervals``
and ``create_delta_data_intervals`` off, its defaults): a cron string or preset is a
``CronTriggerTimetable``, a timedelta a ``DeltaTriggerTimetable``, ``@once`` an
``OnceTimetable``. A run's logical date is the moment it is due, its data interval is that one
instant (start = end = logical date) and ``run_after`` is the same moment.

With ``catchup`` off only the latest due moment is run (missed ones are skipped); with it on,
every moment from ``start_date`` (or the last run) on, one after another. Without a start
date or an earlier run, a cron schedule runs its latest moment only if it passed less than a
tenth of its period ago (at least 5 minutes), else it waits for the next (Airflow's
``CronTriggerTimetable._calc_first_run``); a timedelta runs at once. Cron expressions are
read in the DAG's timezone, so ``0 2 * * *`` in Europe/Berlin stays 02:00 local across a DST
change; results are always UTC. The caller passes ``now``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cron_descriptor import CasingTypeEnum, ExpressionDescriptor, FormatException
from croniter import CroniterBadCronError, croniter

PRESETS: dict[str, str | None] = {
    "@once": None,
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@quarterly": "0 0 1 */3 *",
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}


@dataclasses.dataclass(frozen=True, kw_only=True)
class DagRunInfo:
    """The next run's dates (Airflow's ``DagRunInfo``), all UTC."""

    logical_date: datetime
    data_interval_start: datetime
    data_interval_end: datetime
    run_after: datetime

    @classmethod
    def exact(cls, at: datetime) -> DagRunInfo:
        return cls(logical_date=at, data_interval_start=at, data_interval_end=at, run_after=at)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Timetable:
    """A parsed time schedule: exactly one of ``cron``, ``delta`` or ``once`` applies."""

    cron: str | None = None
    delta: timedelta | None = None
    once: bool = False
    timezone: str = "UTC"

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    @property
    def description(self) -> str:
        """The schedule in words, as Airflow's timetables say it (``At 00:00``, ``Every 15
        minutes``; cron_descriptor, as Airflow's ``CronMixin``); the zone when not UTC."""
        if self.once:
            return "Once, as soon as possible"
        if self.delta is not None:
            words = f"Every {_delta_words(self.delta)}"
        else:
            assert self.cron is not None  # noqa: S101 - one of the three applies
            words = _cron_words(self.cron)
        return words if self.timezone == "UTC" else f"{words} ({self.timezone})"

    def as_json(self) -> dict[str, Any]:
        """The stored form (``Dag.timetable``); :func:`timetable_from_json` reads it back."""
        if self.once:
            return {"once": True, "timezone": self.timezone}
        if self.delta is not None:
            return {"delta": self.delta.total_seconds(), "timezone": self.timezone}
        return {"cron": self.cron, "timezone": self.timezone}

    def _cron_step(self, current: datetime, *, forward: bool) -> datetime:
        """The first cron moment strictly after (or before) ``current``, DST-safe like Airflow."""
        assert self.cron is not None  # noqa: S101 - only called for cron timetables
        local = current.astimezone(self.zone)
        naive = local.replace(tzinfo=None)
        it = croniter(self.cron, start_time=naive)
        scheduled: datetime = it.get_next(datetime) if forward else it.get_prev(datetime)
        if it.expanded[1] == ["*"]:  # every hour: step in elapsed time, not wall time
            return current.astimezone(UTC) + (scheduled - naive)
        return self._localize(scheduled)

    def _localize(self, naive: datetime) -> datetime:
        """A wall time of the zone in UTC, as Airflow's ``make_aware`` (pendulum) places it: an
        ambiguous time (the hour repeated when DST ends) is its second instance; a time that
        does not exist (skipped when DST starts) is moved forward by the gap."""
        second = naive.replace(tzinfo=self.zone, fold=1).astimezone(UTC)
        if second.astimezone(self.zone).replace(tzinfo=None) == naive:
            return second
        return naive.replace(tzinfo=self.zone, fold=0).astimezone(UTC)  # in the gap

    def _align_to_next(self, current: datetime) -> datetime:
        """``current`` if it is a cron moment, else the next one."""
        nxt = self._cron_step(current, forward=True)
        return current if self._cron_step(nxt, forward=False) == current else nxt

    def _align_to_prev(self, current: datetime) -> datetime:
        """``current`` if it is a cron moment, else the previous one."""
        prev = self._cron_step(current, forward=False)
        return current if self._cron_step(prev, forward=True) == current else prev

    def _first_run(self, now: datetime) -> datetime:
        """The first run of a schedule without a start date or an earlier run (Airflow's
        ``_calc_first_run``): a timedelta runs now; a cron runs its latest moment if that was
        at most a tenth of the gap between its moments ago (and at least 5 minutes), else it
        waits for the next one."""
        if self.delta is not None:
            return now
        past, upcoming = self._align_to_prev(now), self._align_to_next(now)
        buffer = max((upcoming - past) / 10, timedelta(minutes=5))
        return past if now - past <= buffer else upcoming

    def _get_next(self, current: datetime) -> datetime:
        if self.delta is not None:
            return current + self.delta
        return self._cron_step(current, forward=True)

    def next_run(
        self,
        *,
        last_run_after: datetime | None,
        start_date: datetime | None,
        end_date: datetime | None,
        catchup: bool,
        now: datetime,
    ) -> DagRunInfo | None:
        """The run after the last automated one (``last_run_after``), or ``None`` for no more.

        ``start_date`` / ``end_date`` bound the schedule (Airflow's ``TimeRestriction``
        ``earliest`` / ``latest``). The result may lie in the future: it is due once
        ``now >= run_after``.
        """
        if self.once:
            if last_run_after is not None:
                return None
            at = start_date or now
            return None if end_date is not None and at > end_date else DagRunInfo.exact(at)
        align_next: Callable[[datetime], datetime] = _unaligned
        align_prev: Callable[[datetime], datetime] = _unaligned
        if self.delta is None:
            align_next, align_prev = self._align_to_next, self._align_to_prev
        if catchup:
            if last_run_after is not None:
                at = self._get_next(last_run_after)
            elif start_date is None:
                at = self._first_run(now)
            else:
                at = align_next(start_date)
        else:
            candidates = [align_prev(now)]
            if last_run_after is not None:
                candidates.append(self._get_next(last_run_after))
            elif start_date is None:
                candidates.append(self._first_run(now))
            if start_date is not None:
                candidates.append(align_next(start_date))
            at = max(candidates)
        if end_date is not None and end_date < at:
            return None
        return DagRunInfo.exact(at)


def _cron_words(expression: str) -> str:
    """Airflow's ``CronMixin.description``: a day of the month and a day of the week both set
    means either (cron's rule), said as two sentences joined by "(or)"."""

    def words(fields: list[str]) -> str:
        try:
            return str(
                ExpressionDescriptor(
                    " ".join(fields),
                    casing_type=CasingTypeEnum.Sentence,
                    use_24hour_time_format=True,
                ).get_description()
            )
        except (FormatException, ValueError):
            return " ".join(fields)

    fields = expression.split()
    if len(fields) == 5 and fields[2] != "*" and fields[4] != "*":
        by_day_of_month = [*fields[:4], "*"]
        by_day_of_week = [*fields[:2], "*", *fields[3:]]
        return f"{words(by_day_of_month)} (or) {words(by_day_of_week)}"
    return words(fields)


def _delta_words(delta: timedelta) -> str:
    """``2 hours``, ``1 day, 6 hours``, ``90 seconds``: the largest whole units."""
    seconds = int(delta.total_seconds())
    parts = []
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1)):
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count} {unit}{'s' if count != 1 else ''}")
    return ", ".join(parts) or str(delta)


def _unaligned(at: datetime) -> datetime:
    """A timedelta schedule runs at any moment: nothing to align to."""
    return at


_DELTA = re.compile(
    r"^(?:(?P<days>\d+) days?,? ?)?(?P<hours>\d{1,2}):(?P<minutes>\d{2}):(?P<seconds>\d{2})$"
)


def timedelta_parse(value: str | float) -> timedelta:
    """A positive timedelta from seconds (a number) or ``str(timedelta)`` (``"1 day, 2:00:00"``).

    ``ValueError`` with a message saying what is accepted.
    """
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a timedelta")
    if isinstance(value, int | float):
        delta = timedelta(seconds=value)
    else:
        match = _DELTA.match(value.strip())
        if match is None:
            raise ValueError(
                f"{value!r} is not a timedelta: give seconds or 'H:MM:SS' / 'N days, H:MM:SS'"
            )
        delta = timedelta(**{k: int(v) for k, v in match.groupdict(default="0").items()})
    if delta <= timedelta(0):
        raise ValueError(f"{value!r}: a schedule's timedelta must be positive")
    return delta


def timetable_parse(
    *, schedule: str | None = None, delta: str | float | None = None, timezone: str = "UTC"
) -> Timetable:
    """Parse a cron string / preset (``schedule``) or a timedelta (``delta``).

    ``ValueError`` naming what is wrong: an unknown preset, a bad cron, a bad timedelta, an
    unknown timezone, or both or neither given.
    """
    try:
        ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown timezone {timezone!r}") from None
    if (schedule is None) == (delta is None):
        raise ValueError("give exactly one of a cron schedule and a timedelta")
    if delta is not None:
        return Timetable(delta=timedelta_parse(delta), timezone=timezone)
    assert schedule is not None  # noqa: S101 - checked just above
    expression = schedule.strip()
    if expression.startswith("@"):
        if expression not in PRESETS:
            raise ValueError(f"unknown preset {expression!r}; one of {', '.join(PRESETS)}")
        cron = PRESETS[expression]
        if cron is None:
            return Timetable(once=True, timezone=timezone)
        expression = cron
    try:
        croniter(expression)
    except (CroniterBadCronError, ValueError, KeyError) as exc:
        raise ValueError(f"{schedule!r} is not a valid cron expression: {exc}") from None
    return Timetable(cron=expression, timezone=timezone)


def timetable_from_json(stored: Mapping[str, Any]) -> Timetable:
    """A timetable from its stored form (:meth:`Timetable.as_json`); ``ValueError`` if it is
    not one."""
    timezone = str(stored.get("timezone", "UTC"))
    if stored.get("once"):
        return Timetable(once=True, timezone=timezone)
    if "delta" in stored:
        return timetable_parse(delta=float(stored["delta"]), timezone=timezone)
    if "cron" in stored:
        return timetable_parse(schedule=str(stored["cron"]), timezone=timezone)
    raise ValueError(f"not a stored timetable: {dict(stored)!r}")
