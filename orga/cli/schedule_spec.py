"""When a schedule fires: ``--cron`` / ``--every`` read into a Temporal ``ScheduleSpec``, and a
spec written back as a person writes it (the server keeps a cron as calendars).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime, timedelta

from temporalio.client import (
    ScheduleCalendarSpec,
    ScheduleIntervalSpec,
    ScheduleRange,
    ScheduleSpec,
)

from orga.cli.common import CliError

__all__ = ["iso", "parse_duration", "render_spec", "schedule_spec"]


def schedule_spec(cron: str | None, every: str | None) -> ScheduleSpec:
    """The spec of ``--cron`` or ``--every`` (exactly one of them).

    Raises:
        CliError: both or neither given, or an ``--every`` that is not a duration.
    """
    if cron is not None and every is not None:
        raise CliError("give one of --cron and --every, not both", 2)
    if cron is not None:
        return ScheduleSpec(cron_expressions=[cron])
    if every is not None:
        return ScheduleSpec(intervals=[ScheduleIntervalSpec(every=parse_duration(every))])
    raise CliError("say when: --cron '0 9 * * 1-5' or --every 30m", 2)


_DURATION = re.compile(r"(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")


def parse_duration(text: str, option: str = "--every") -> timedelta:
    """``30s``, ``5m``, ``1h``, ``1d`` or a combination in that order (``1h30m``), at least a
    second (``option`` names the flag in the error)."""
    match = _DURATION.fullmatch(text.strip())
    if not match or not any(match.groups()):
        raise CliError(
            f"invalid {option} {text!r}: write a duration such as 30s, 5m, 1h, 7d or 1h30m", 2
        )
    days, hours, minutes, seconds = (int(part or 0) for part in match.groups())
    duration = timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)
    if duration < timedelta(seconds=1):
        raise CliError(f"invalid {option} {text!r}: at least a second", 2)
    return duration


_CRON_FIELDS: tuple[tuple[str, int, int], ...] = (
    ("minute", 0, 59),
    ("hour", 0, 23),
    ("day_of_month", 1, 31),
    ("month", 1, 12),
    ("day_of_week", 0, 6),
)


def render_spec(spec: ScheduleSpec) -> str:
    """The spec as a person writes it. The server keeps a cron as calendars; it is written
    back as cron (``cron 0 9 * * 1-5``), so schedules made elsewhere read the same way."""
    parts = [f"every {_render_duration(i.every)}" + _offset(i) for i in spec.intervals]
    parts += [f"cron {expression}" for expression in spec.cron_expressions]
    parts += [f"cron {_cron(calendar)}" for calendar in spec.calendars]
    text = "; ".join(parts) or "no times"
    return f"{text} ({spec.time_zone_name})" if spec.time_zone_name else text


def _offset(interval: ScheduleIntervalSpec) -> str:
    return f" (offset {_render_duration(interval.offset)})" if interval.offset else ""


def _render_duration(duration: timedelta) -> str:
    seconds = int(duration.total_seconds())
    units = (("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1))
    text = ""
    for unit, size in units:
        count, seconds = divmod(seconds, size)
        text += f"{count}{unit}" if count else ""
    return text or "0s"


def _cron(calendar: ScheduleCalendarSpec) -> str:
    fields = [_cron_field(getattr(calendar, name), low, high) for name, low, high in _CRON_FIELDS]
    second = _cron_field(calendar.second, 0, 59)
    return " ".join(fields if second == "0" else [second, *fields])


def _cron_field(ranges: Sequence[ScheduleRange], low: int, high: int) -> str:
    if not ranges:
        return "*"
    rendered: list[str] = []
    for one in ranges:
        end = max(one.end, one.start)  # an end before the start means the start alone
        step = f"/{one.step}" if one.step > 1 else ""
        if (one.start, end) == (low, high):
            rendered.append(f"*{step}")
        elif end == one.start:
            rendered.append(str(one.start))
        else:
            rendered.append(f"{one.start}-{end}{step}")
    return ",".join(rendered)


def iso(moment: datetime) -> str:
    """A run's time as ``list`` and ``create`` show it (to the second)."""
    return moment.isoformat(timespec="seconds")
