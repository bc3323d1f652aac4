"""CronJob schedules as the API server parses them (robfig/cron v3 ``ParseStandard``).

https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/#schedule-syntax:
five fields (minute, hour, day of month, month, day of week), each a ``*`` or ``?``,
a number, a range ``a-b``, a step ``/n`` and comma-separated lists of those; months
and weekdays may be named (``JAN``, ``SUN``); the macros ``@yearly``, ``@annually``,
``@monthly``, ``@weekly``, ``@daily``, ``@midnight``, ``@hourly`` and ``@every <d>``.
The API server validates ``spec.schedule`` with this parser and reports its error
text verbatim (``expected exactly 5 fields, found 1: [off]``), so :func:`parse`
raises :class:`CronError` with robfig/cron's wording.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


class CronError(ValueError):
    """A schedule the parser refuses; ``str()`` is robfig/cron's message."""


@dataclass(frozen=True)
class _Bounds:
    low: int
    high: int
    names: tuple[str, ...] = ()  # names[i] stands for low + i


_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_FIELDS = (
    _Bounds(0, 59),
    _Bounds(0, 23),
    _Bounds(1, 31),
    _Bounds(1, 12, _MONTHS),
    _Bounds(0, 6, _DAYS),
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
_DURATION = re.compile(r"^([0-9]*(\.[0-9]*)?(ns|us|µs|ms|s|m|h))+$")


@dataclass(frozen=True)
class Schedule:
    """The minutes, hours, days, months and weekdays a schedule fires on (``every``: the
    ``@every`` interval in seconds instead)."""

    minutes: frozenset[int] = frozenset()
    hours: frozenset[int] = frozenset()
    days: frozenset[int] = frozenset()
    months: frozenset[int] = frozenset()
    weekdays: frozenset[int] = frozenset()
    every: float = 0.0
    any_day: bool = True  # day of month given as "*" or "?": only the weekday restricts
    any_weekday: bool = True


def _atoi(text: str) -> int:
    """Go's ``strconv.Atoi`` with robfig/cron's wrapping of its errors."""
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        error = f'strconv.Atoi: parsing "{text}": invalid syntax'
        raise CronError(f"failed to parse int from {text}: {error}")
    number = int(text)
    if number < 0:
        raise CronError(f"negative number ({number}) not allowed: {text}")
    return number


def _value(text: str, bounds: _Bounds) -> int:
    if text.lower() in bounds.names:
        return bounds.low + bounds.names.index(text.lower())
    return _atoi(text)


def _range(expr: str, bounds: _Bounds) -> set[int]:
    range_and_step = expr.split("/")
    low_and_high = range_and_step[0].split("-")
    if low_and_high[0] in ("*", "?"):
        start, end = bounds.low, bounds.high
    else:
        start = _value(low_and_high[0], bounds)
        if len(low_and_high) == 1:
            end = start
        elif len(low_and_high) == 2:
            end = _value(low_and_high[1], bounds)
        else:
            raise CronError(f"too many hyphens: {expr}")
    if len(range_and_step) == 1:
        step = 1
    elif len(range_and_step) == 2:
        step = _atoi(range_and_step[1])
        if len(low_and_high) == 1:
            end = bounds.high  # "N/step" means "N-max/step"
    else:
        raise CronError(f"too many slashes: {expr}")
    if start < bounds.low:
        raise CronError(f"beginning of range ({start}) below minimum ({bounds.low}): {expr}")
    if end > bounds.high:
        raise CronError(f"end of range ({end}) above maximum ({bounds.high}): {expr}")
    if start > end:
        raise CronError(f"beginning of range ({start}) beyond end of range ({end}): {expr}")
    if step == 0:
        raise CronError(f"step of range should be a positive number: {expr}")
    return set(range(start, end + 1, step))


def _every(spec: str) -> Schedule:
    text = spec[len("@every ") :]
    if not _DURATION.match(text) or text in ("", "."):
        raise CronError(f'failed to parse duration {spec}: time: invalid duration "{text}"')
    units = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
    seconds = sum(
        float(number) * units[unit]
        for number, unit in re.findall(r"([0-9]*\.?[0-9]*)(ns|us|µs|ms|s|m|h)", text)
    )
    return Schedule(every=max(seconds, 1.0))  # robfig/cron rounds below a second up


def parse(spec: str) -> Schedule:
    """The schedule ``spec`` describes; :class:`CronError` with the parser's message if none."""
    if not spec:
        raise CronError("empty spec string")
    if spec.startswith(("TZ=", "CRON_TZ=")):
        # the parser reads a leading time zone; the API server refuses it afterwards
        spec = spec.partition(" ")[2].strip()
    if spec.startswith("@"):
        if spec.startswith("@every "):
            return _every(spec)
        if spec not in _DESCRIPTORS:
            raise CronError(f"unrecognized descriptor: {spec}")
        spec = _DESCRIPTORS[spec]
    fields = spec.split()
    if len(fields) != 5:
        raise CronError(f"expected exactly 5 fields, found {len(fields)}: [{' '.join(fields)}]")
    sets = []
    for text, bounds in zip(fields, _FIELDS, strict=True):
        values: set[int] = set()
        for part in text.split(","):
            values |= _range(part, bounds)
        sets.append(frozenset(values))
    minutes, hours, days, months, weekdays = sets
    return Schedule(
        minutes,
        hours,
        days,
        months,
        weekdays,
        any_day=fields[2] in ("*", "?"),
        any_weekday=fields[4] in ("*", "?"),
    )
