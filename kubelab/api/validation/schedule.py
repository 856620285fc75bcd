"""CronJob schedules: the five-field cron syntax and the @hourly-style descriptors.

Kubernetes parses schedules with robfig/cron's standard parser and returns that parser's
error text as the field error, so this parser reports the same mistakes with the same
words ("end of range (60) above maximum (59): 0-60"). It returns the expanded field sets
so that whatever later fires the jobs can use the same reading of the schedule.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_MONTH_NAMES = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_MONTHS = {m: i for i, m in enumerate(_MONTH_NAMES, 1)}
_DAYS = {d: i for i, d in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}
# (minimum, maximum, names) for minute, hour, day of month, month, day of week.
_FIELDS: tuple[tuple[int, int, dict[str, int]], ...] = (
    (0, 59, {}),
    (0, 23, {}),
    (1, 31, {}),
    (1, 12, _MONTHS),
    (0, 6, _DAYS),
)
_DESCRIPTORS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_DURATION = re.compile(r"([0-9]*\.?[0-9]+(ns|us|µs|ms|s|m|h))+")
_DURATION_PART = re.compile(r"([0-9]*\.?[0-9]+)(ns|us|µs|ms|s|m|h)")
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


@dataclass(frozen=True)
class Schedule:
    """The minutes, hours, days, months and weekdays a schedule fires on; an
    "@every 1h30m" schedule has its interval (Go duration text) in `every` instead."""

    minutes: frozenset[int] = frozenset()
    hours: frozenset[int] = frozenset()
    days: frozenset[int] = frozenset()
    months: frozenset[int] = frozenset()
    weekdays: frozenset[int] = frozenset()
    every: str = ""

    def interval(self) -> float:
        """Seconds between the runs of an "@every" schedule (robfig/cron rounds an
        interval below a second up to one); 0 for a cron schedule."""
        if not self.every:
            return 0.0
        seconds = sum(float(n) * _UNITS[u] for n, u in _DURATION_PART.findall(self.every))
        return max(1.0, seconds)


def parse_schedule(spec: str) -> Schedule:
    """Parse a schedule; ValueError carries robfig/cron's message for a bad one."""
    if not spec:
        raise ValueError("empty spec string")
    if spec.startswith(("TZ=", "CRON_TZ=")):
        raise ValueError("cannot use TZ or CRON_TZ in schedule, use timeZone field instead")
    if spec.startswith("@"):
        if spec.startswith("@every "):
            duration = spec[len("@every ") :]
            if not _DURATION.fullmatch(duration):
                raise ValueError(
                    f'failed to parse duration {spec}: time: invalid duration "{duration}"'
                )
            return Schedule(every=duration)
        if spec not in _DESCRIPTORS:
            raise ValueError(f"unrecognized descriptor: {spec}")
        spec = _DESCRIPTORS[spec]
    fields = spec.split()
    if len(fields) != 5:
        raise ValueError(f"expected exactly 5 fields, found {len(fields)}: [{' '.join(fields)}]")
    minutes, hours, days, months, weekdays = (
        _field(text, low, high, names)
        for text, (low, high, names) in zip(fields, _FIELDS, strict=True)
    )
    return Schedule(minutes, hours, days, months, weekdays)


def _field(text: str, low: int, high: int, names: dict[str, int]) -> frozenset[int]:
    values: set[int] = set()
    for expr in (part for part in text.split(",") if part):
        values |= _range(expr, low, high, names)
    return frozenset(values)


def _range(expr: str, low: int, high: int, names: dict[str, int]) -> set[int]:
    """One "a", "a-b", "*", with an optional "/step", as robfig/cron reads it."""
    range_part, *steps = expr.split("/")
    bounds = range_part.split("-")
    if bounds[0] in ("*", "?"):
        start, end = low, high
    else:
        start = _number(bounds[0], names)
        if len(bounds) == 1:
            end = start
        elif len(bounds) == 2:
            end = _number(bounds[1], names)
        else:
            raise ValueError(f"too many hyphens: {expr}")
    step = 1
    if len(steps) == 1:
        step = _number(steps[0], {})
        if len(bounds) == 1:  # "N/step" means "N-max/step"
            end = high
    elif len(steps) > 1:
        raise ValueError(f"too many slashes: {expr}")
    if start < low:
        raise ValueError(f"beginning of range ({start}) below minimum ({low}): {expr}")
    if end > high:
        raise ValueError(f"end of range ({end}) above maximum ({high}): {expr}")
    if start > end:
        raise ValueError(f"beginning of range ({start}) beyond end of range ({end}): {expr}")
    if step == 0:
        raise ValueError(f"step of range should be a positive number: {expr}")
    return set(range(start, end + 1, step))


def _number(text: str, names: dict[str, int]) -> int:
    if text.lower() in names:
        return names[text.lower()]
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        raise ValueError(
            f'failed to parse int from {text}: strconv.Atoi: parsing "{text}": invalid syntax'
        )
    number = int(text)
    if number < 0:
        raise ValueError(f"negative number ({number}) not allowed: {text}")
    return number
