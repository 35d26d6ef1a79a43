"""The top-level members of one large JSON object, found without parsing it: a file of any size in
bounded memory (a ``vllm bench serve --save-detailed`` result is one object of up to gigabytes, most of
it per-token gaps and generated texts no share needs).

The file is read in chunks as bytes and scanned with numpy: quotes not escaped by an odd run of
backslashes open and close strings; brackets outside strings give the depth; a ``:`` or ``,`` at depth
1 outside a string separates the object's members. ``slim`` copies the members asked for, byte for
byte, into a small JSON object that DuckDB then reads (every per-request computation stays in SQL).
"""

from __future__ import annotations

import json
import mmap
from dataclasses import dataclass
from pathlib import Path

import numpy as np

CHUNK = 4 << 20  # bytes scanned at a time: the scan's memory is a few times this
MAX_MEMBERS = 100_000  # a vllm bench result has about 50
_QUOTE, _BACKSLASH, _COLON, _COMMA = 34, 92, 58, 44
_OPEN, _CLOSE = (91, 123), (93, 125)  # [ {  and  ] }
_SPACE = b" \t\r\n"
_STRUCTURAL = np.zeros(256, dtype=bool)
_STRUCTURAL[[*_OPEN, *_CLOSE, _COLON, _COMMA]] = True
_STEP = np.zeros(256, dtype=np.int8)
_STEP[list(_OPEN)], _STEP[list(_CLOSE)] = 1, -1


class JsonScanError(ValueError):
    """The file is not one complete JSON object (its message says where it stops being one)."""


@dataclass(frozen=True)
class Member:
    key: str
    value_start: int  # byte offsets of the value's text in the file: [value_start, value_end)
    value_end: int


_OPENS, _KEY, _NEXT, _CLOSES = 0, 1, 2, 3  # kinds of separator: '{', ':', ',', '}' of objects at the depth asked


def _separators(path: Path, depth: int, max_members: int) -> tuple[np.ndarray, np.ndarray]:
    """Positions and kinds of the separators of every object at ``depth`` (1: the top-level object):
    its opening ``{``, the ``:`` and ``,`` directly inside it, its closing ``}``."""
    positions: list[np.ndarray] = []
    kinds: list[np.ndarray] = []
    count = 0
    in_string, bs_run, level_in, offset, end = 0, 0, 0, 0, None
    with path.open("rb") as fh:
        first = fh.read(1 << 10).lstrip(_SPACE)[:1]
        if first != b"{":
            raise JsonScanError("not a JSON object (it does not start with '{')")
        fh.seek(0)
        while chunk := fh.read(CHUNK):
            a = np.frombuffer(chunk, dtype=np.uint8)
            n = len(a)
            quotes = np.flatnonzero(a == _QUOTE)
            real = quotes[_unescaped(a, quotes, bs_run)]
            toggles = np.zeros(n, dtype=np.uint8)
            toggles[real] = 1
            inside = np.bitwise_xor.accumulate(toggles) ^ in_string  # 1 inside a string (and on its quotes)
            # the structural bytes outside strings, and the depth after each (a sparse cumulative sum)
            marks = np.flatnonzero((inside == 0) & _STRUCTURAL[a])
            chars = a[marks]
            step = _STEP[chars]
            level = level_in + np.cumsum(step, dtype=np.int64)
            closed = np.flatnonzero((level == 0) & (step == -1))
            limit = int(closed[0]) + 1 if len(closed) else len(marks)  # up to the top-level object's '}'
            marks, chars, step, level = marks[:limit], chars[:limit], step[:limit], level[:limit]
            kind = np.full(limit, -1, dtype=np.int8)
            kind[(chars == _OPEN[1]) & (level == depth)] = _OPENS
            kind[(chars == _COLON) & (level == depth)] = _KEY
            kind[(chars == _COMMA) & (level == depth)] = _NEXT
            kind[(chars == _CLOSE[1]) & (level == depth - 1)] = _CLOSES
            found = kind >= 0
            count += int((kind == _KEY).sum())
            if count > max_members:  # their positions are kept: bound them
                raise JsonScanError(f"more than {max_members:,} members in the objects at depth {depth}")
            positions.append(marks[found] + offset)
            kinds.append(kind[found])
            if len(closed):
                end = offset + int(marks[-1])
                rest = chunk[int(marks[-1]) + 1:]
                while rest:  # only white space may follow the object
                    if rest.strip(_SPACE):
                        raise JsonScanError(f"more data after the JSON object ends at byte {end}")
                    rest = fh.read(1 << 20)
                break
            in_string, level_in = int(inside[-1]), int(level[-1]) if len(level) else level_in
            trailing = n - len(chunk.rstrip(b"\\"))  # backslashes ending the chunk: they may escape the next byte
            bs_run = trailing + (bs_run if trailing == n else 0)
            offset += n
    if end is None:
        where = "inside a string" if in_string else f"with {level_in} bracket(s) still open"
        raise JsonScanError(f"the JSON ends at byte {offset}, {where}: the file is truncated")
    return np.concatenate(positions), np.concatenate(kinds)


def members(path: Path, depth: int = 1, max_members: int | None = None, keys: set[str] | None = None
            ) -> list[Member]:
    """The members of every object at ``depth`` of ``path`` (1: the top-level object's), in file order
    (values not parsed); with ``keys``, only the members of those names."""
    positions, kinds = _separators(path, depth, MAX_MEMBERS if max_members is None else max_members)
    out = []
    with path.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        prev = -1
        pos, kind = positions.tolist(), kinds.tolist()
        for i, (at, k) in enumerate(zip(pos, kind, strict=True)):
            if k == _KEY and prev >= 0:
                try:
                    key = json.loads(mm[prev + 1:at])
                except ValueError:
                    raise JsonScanError(f"a member name at byte {prev + 1} is not a JSON string") from None
                if keys is None or key in keys:
                    out.append(Member(str(key), at + 1, pos[i + 1] if i + 1 < len(pos) else at + 1))
            prev = at
    return out


def _unescaped(a: np.ndarray, quotes: np.ndarray, carried: int) -> np.ndarray:
    """Which of the ``quotes`` (positions in chunk ``a``) are not escaped: not preceded by an odd run of
    backslashes (``carried``: the run that ended the previous chunk). Works on the backslashes only,
    which are few."""
    slashes = np.flatnonzero(a == _BACKSLASH)
    if not len(slashes) and not carried:
        return np.ones(len(quotes), dtype=bool)
    # the run of backslashes ending just before each quote: its length from the run's first backslash
    starts = np.ones(len(slashes), dtype=bool)
    starts[1:] = np.diff(slashes) != 1
    first_of_run = slashes[np.maximum.accumulate(np.where(starts, np.arange(len(slashes)), 0))] if len(slashes) else slashes
    at = np.searchsorted(slashes, quotes - 1)
    hit = (at < len(slashes)) & (slashes[np.minimum(at, max(len(slashes) - 1, 0))] == quotes - 1) if len(slashes) \
        else np.zeros(len(quotes), dtype=bool)
    run = np.zeros(len(quotes), dtype=np.int64)
    run[hit] = quotes[hit] - first_of_run[at[hit]]
    run[(run == quotes) & hit] += carried  # a run from the chunk's first byte continues the carried one
    run[quotes == 0] = carried
    return run % 2 == 0


def without(path: Path, depth: int, drop: set[str], out: Path, max_members: int | None = None) -> int:
    """Copy ``path`` to ``out`` with the value of every member named in ``drop`` of the objects at
    ``depth`` replaced by ``null`` (the rest byte for byte); returns how many were replaced."""
    cut = members(path, depth, max_members, keys=drop)
    with path.open("rb") as src, out.open("wb") as dst:
        at = 0
        for m in [*cut, None]:
            upto = m.value_start if m is not None else None
            src.seek(at)
            while upto is None or at < upto:
                piece = src.read(1 << 20 if upto is None else min(1 << 20, upto - at))
                if not piece:
                    break
                dst.write(piece)
                at += len(piece)
            if m is not None:
                dst.write(b" null")
                at = m.value_end
    return len(cut)


def _read(path: Path, lo: int, hi: int) -> bytes:
    with path.open("rb") as fh:
        fh.seek(lo)
        return fh.read(min(hi - lo, 1 << 16))


def slim(path: Path, keys: set[str], out: Path) -> set[str]:
    """Write to ``out`` a JSON object of the members of ``path`` named in ``keys`` (their values copied
    as they are; for a key given twice, the last, as JSON parsers keep); return the keys found."""
    chosen = {m.key: m for m in members(path) if m.key in keys}
    with path.open("rb") as src, out.open("wb") as dst:
        dst.write(b"{")
        for i, m in enumerate(chosen.values()):
            dst.write((", " if i else "").encode() + json.dumps(m.key).encode() + b": ")
            src.seek(m.value_start)
            left = m.value_end - m.value_start
            while left > 0:
                piece = src.read(min(left, 1 << 20))
                if not piece:
                    break
                dst.write(piece)
                left -= len(piece)
        dst.write(b"}\n")
    return set(chosen)


__all__ = ["JsonScanError", "Member", "members", "slim", "without"]
