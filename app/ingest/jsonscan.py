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
from dataclasses import dataclass
from pathlib import Path

import numpy as np

CHUNK = 4 << 20  # bytes scanned at a time: the scan's memory is a few times this
MAX_MEMBERS = 100_000  # a vllm bench result has about 50
_QUOTE, _BACKSLASH, _COLON, _COMMA = 34, 92, 58, 44
_OPEN, _CLOSE = (91, 123), (93, 125)  # [ {  and  ] }
_SPACE = b" \t\r\n"


class JsonScanError(ValueError):
    """The file is not one complete JSON object (its message says where it stops being one)."""


@dataclass(frozen=True)
class Member:
    key: str
    value_start: int  # byte offsets of the value's text in the file: [value_start, value_end)
    value_end: int


def members(path: Path) -> list[Member]:
    """The members of the top-level object of ``path``, in file order (values not parsed)."""
    seps: list[int] = []  # top-level ':' and ',' and the closing '}', in order
    colons: set[int] = set()
    start = end = None
    in_string, bs_run, depth, offset = 0, 0, 0, 0
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
            outside = inside == 0
            step = np.zeros(n, dtype=np.int8)
            step[((a == _OPEN[0]) | (a == _OPEN[1])) & outside] = 1
            step[((a == _CLOSE[0]) | (a == _CLOSE[1])) & outside] = -1
            level = depth + np.cumsum(step, dtype=np.int32)
            if start is None:
                opened = np.flatnonzero((level == 1) & (step == 1))
                if len(opened):
                    start = offset + int(opened[0])
            closed = np.flatnonzero((level == 0) & (step == -1))
            limit = int(closed[0]) if len(closed) else n  # the object's closing '}', if in this chunk
            top = outside[:limit] & (level[:limit] == 1)
            found = np.flatnonzero(top & ((a[:limit] == _COLON) | (a[:limit] == _COMMA)))
            if len(seps) + len(found) > 2 * MAX_MEMBERS:  # the positions are kept: bound them
                raise JsonScanError(f"more than {MAX_MEMBERS:,} members at the top level of the object")
            for i in found.tolist():
                seps.append(offset + i)
                if a[i] == _COLON:
                    colons.add(offset + i)
            if len(closed):
                end = offset + limit
                seps.append(end)
                rest = chunk[limit + 1:]
                while rest:  # only white space may follow the object
                    if rest.strip(_SPACE):
                        raise JsonScanError(f"more data after the JSON object ends at byte {end}")
                    rest = fh.read(1 << 20)
                break
            in_string, depth = int(inside[-1]), int(level[-1])
            trailing = n - len(chunk.rstrip(b"\\"))  # backslashes ending the chunk: they may escape the next byte
            bs_run = trailing + (bs_run if trailing == n else 0)
            offset += n
    if end is None:
        where = "inside a string" if in_string else f"with {depth} bracket(s) still open"
        raise JsonScanError(f"the JSON ends at byte {offset}, {where}: the file is truncated")
    out = []
    prev = start
    for i, sep in enumerate(seps):
        if sep in colons:
            key_text = _read(path, prev + 1, sep)
            value_end = seps[i + 1] if i + 1 < len(seps) else end
            try:
                key = json.loads(key_text)
            except ValueError:
                raise JsonScanError(f"a member name at byte {prev + 1} is not a JSON string") from None
            out.append(Member(str(key), sep + 1, value_end))
        prev = sep
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


__all__ = ["JsonScanError", "Member", "members", "slim"]
