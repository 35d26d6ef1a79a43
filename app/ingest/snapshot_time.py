"""When a snapshot without sample timestamps was taken: from a comment, the file name, or its mtime.

A scrape saved with ``curl /metrics > file`` carries no sample timestamps. Its time comes, in this
order of preference, from

1. a comment line before the samples that holds only a timestamp, optionally after a word and
   ``=``/``:`` (``# 2026-11-29T10:00:00Z``, ``# scrape_time=1764410400``, ``# time: 2026-11-29 10:00:00``);
2. a timestamp in the file name (single-snapshot files only);
3. the file's modification time.

Accepted timestamps (UTC unless an offset is given):

- ISO-8601 extended: ``2026-11-29T10:15:00Z``, ``2026-11-29 10:15:00.250+01:00``,
  and the file-name-safe ``2026-11-29_10-15-00``;
- ISO-8601 basic: ``20261129T101500Z``, ``20261129-101500`` (``vllm bench`` file names), ``20261129_101500``;
- Unix epoch: seconds (10 digits, e.g. ``1764410400``, fractions allowed in comments) or
  milliseconds (13 digits); in comments any magnitude rule of the long formats applies
  (< 1e11 seconds, < 1e14 ms, < 1e17 µs, else ns).

Only a handful of strings are parsed here (one per file or per snapshot), never per sample.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

_OFFSET = r"(?P<tz>[Zz]|[+-]\d{2}(?::?\d{2})?)?"
_EXTENDED = re.compile(
    r"(?P<y>\d{4})-(?P<mo>\d{2})-(?P<d>\d{2})[Tt _](?P<h>\d{2})(?P<sep>[:-])(?P<mi>\d{2})"
    r"(?:(?P=sep)(?P<s>\d{2})(?:[.,](?P<f>\d{1,9}))?)?" + _OFFSET
)
_BASIC = re.compile(
    r"(?P<y>\d{4})(?P<mo>\d{2})(?P<d>\d{2})[Tt_-]?(?P<h>\d{2})(?P<mi>\d{2})(?P<s>\d{2})"
    r"(?:[.,](?P<f>\d{1,9}))?" + _OFFSET
)
_EPOCH_IN_NAME = re.compile(r"(?<!\d)(?P<n>\d{13}|\d{10})(?!\d)")
_EPOCH_WHOLE = re.compile(r"(?P<n>\d{9,19}(?:\.\d+)?)")

# plausible scrape times; a 10-digit number outside this range is more likely an id than a time
_EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)
_LATEST = datetime(2100, 1, 1, tzinfo=UTC)


def _offset(tz: str | None) -> timezone:
    if not tz or tz in "Zz":
        return UTC
    sign = -1 if tz[0] == "-" else 1
    digits = tz[1:].replace(":", "")
    hours, minutes = int(digits[:2]), int(digits[2:4] or 0)
    return timezone(sign * timedelta(hours=hours, minutes=minutes))


def _from_match(m: re.Match[str]) -> datetime | None:
    g = m.groupdict()
    try:
        frac = (g.get("f") or "").ljust(6, "0")[:6]
        dt = datetime(
            int(g["y"]), int(g["mo"]), int(g["d"]), int(g["h"]), int(g["mi"]), int(g.get("s") or 0),
            int(frac or 0), tzinfo=_offset(g.get("tz")),
        )
    except ValueError:  # month 13, hour 25: not a time
        return None
    return _plausible(dt.astimezone(UTC))


def _from_epoch(number: str) -> datetime | None:
    value = float(number)
    magnitude = abs(value)
    if magnitude < 1e11:
        seconds = value
    elif magnitude < 1e14:
        seconds = value / 1e3
    elif magnitude < 1e17:
        seconds = value / 1e6
    else:
        seconds = value / 1e9
    try:
        return _plausible(datetime.fromtimestamp(seconds, UTC))
    except (OverflowError, OSError, ValueError):
        return None


def _plausible(dt: datetime) -> datetime | None:
    return dt if _EARLIEST <= dt < _LATEST else None


def _naive_utc(dt: datetime | None) -> datetime | None:
    return dt.astimezone(UTC).replace(tzinfo=None) if dt else None


def parse_time_text(text: str) -> datetime | None:
    """The UTC time (naive) that is the whole of ``text`` (ISO-8601 or Unix epoch), else None."""
    token = text.strip()
    for pattern in (_EXTENDED, _BASIC):
        m = pattern.fullmatch(token)
        if m:
            return _naive_utc(_from_match(m))
    m = _EPOCH_WHOLE.fullmatch(token)
    return _naive_utc(_from_epoch(m["n"])) if m else None


def time_from_name(name: str) -> datetime | None:
    """The first timestamp found in a file name (UTC, naive), else None."""
    stem = name.removesuffix(".gz")
    for pattern in (_EXTENDED, _BASIC):
        for m in pattern.finditer(stem):
            # a digit right before or after means the match is part of a longer number
            if (m.start() > 0 and stem[m.start() - 1].isdigit()) or (
                m.end() < len(stem) and stem[m.end()].isdigit()
            ):
                continue
            dt = _from_match(m)
            if dt:
                return _naive_utc(dt)
    for m in _EPOCH_IN_NAME.finditer(stem):
        dt = _from_epoch(m["n"])
        if dt:
            return _naive_utc(dt)
    return None


def file_mtime(path: Path) -> datetime:
    """The modification time of ``path`` (UTC, naive, whole microseconds)."""
    return datetime.fromtimestamp(path.stat().st_mtime, UTC).replace(tzinfo=None)


def iso(dt: datetime) -> str:
    return dt.isoformat(timespec="seconds" if not dt.microsecond else "milliseconds") + "Z"


__all__ = ["file_mtime", "iso", "parse_time_text", "time_from_name"]
