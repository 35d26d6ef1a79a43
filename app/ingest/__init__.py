"""Ingest: detect a file's format from its content and stage its samples in DuckDB.

One module per format; each exposes ``read(con, src) -> Staged`` meeting the contract in
``app.ingest.base``. ``stage(con, path)`` is the single entry point used by the store.
"""

from __future__ import annotations

import codecs
import gzip
import os
import tempfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from app import sql
from app.ingest import aiperf, checks, longform, promjson, promtool, text, vmjson
from app.ingest.base import FORMATS, IngestError, Source, Staged, drop_temp
from app.ingest.detect import detect

GZIP_MAGIC = b"\x1f\x8b"
# The most a gzip file may decompress to: a bound on the temporary disk a load may fill (a "gzip bomb"
# of a few MB can expand to terabytes). $HEADROOM_MAX_DECOMPRESSED overrides it, in bytes or with a
# K/M/G/T suffix (binary units).
MAX_DECOMPRESSED_ENV = "HEADROOM_MAX_DECOMPRESSED"
DEFAULT_MAX_DECOMPRESSED = 8 << 30
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def max_decompressed() -> int:
    """The decompressed-size limit in bytes (``$HEADROOM_MAX_DECOMPRESSED``, default 8 GiB)."""
    text = os.environ.get(MAX_DECOMPRESSED_ENV, "").strip().upper().removesuffix("B").removesuffix("I")
    if not text:
        return DEFAULT_MAX_DECOMPRESSED
    number, unit = (text[:-1], text[-1]) if text[-1] in _UNITS else (text, "")
    try:
        return max(1, int(float(number) * _UNITS[unit]))
    except ValueError:
        raise ValueError(f"${MAX_DECOMPRESSED_ENV}={os.environ[MAX_DECOMPRESSED_ENV]!r} is not a size "
                         "(bytes, or a number with K, M, G or T)") from None


def size_text(n: int) -> str:
    """``n`` bytes as the largest binary unit that divides it into a number of at least 1 (``4 MiB``)."""
    for unit, name in ((1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if n >= unit:
            return f"{n / unit:g} {name}"
    return f"{n} bytes"


@contextmanager
def open_source(path: Path, display: str | None = None) -> Iterator[Source]:
    """Yield a ``Source`` for ``path``, decompressing gzip (detected by its magic bytes) and decoding
    UTF-16 text (a BOM, or every other byte NUL) to temp files."""
    display = display or path.name
    if not path.is_file():
        raise IngestError(display, "no such file")
    with path.open("rb") as fh:
        magic = fh.read(2)
    with tempfile.TemporaryDirectory(prefix="headroom-src-") as tmp:
        plain = _gunzip(path, display, Path(tmp)) if magic == GZIP_MAGIC else path
        src = Source(path=plain, display=display, original=path, gzip=magic == GZIP_MAGIC)
        encoding = utf16_encoding(src.head(4096))
        if encoding:
            src.path = _to_utf8(src, encoding, Path(tmp))
            src.notes.append(f"the file is UTF-16 text ({_ENCODING_NAMES[encoding]}), as Windows PowerShell's `>` "
                             "and Out-File save it: decoded to UTF-8 and read as it stands")
        yield src


def _gunzip(path: Path, display: str, tmp: Path) -> Path:
    out = tmp / (path.name.removesuffix(".gz") or "data")
    try:
        limit = max_decompressed()
    except ValueError as exc:
        raise IngestError(display, str(exc)) from None
    try:
        written = 0
        with gzip.open(path, "rb") as src, out.open("wb") as dst:
            while chunk := src.read(1 << 20):
                written += len(chunk)
                if written > limit:
                    raise IngestError(display, f"decompresses to more than {size_text(limit)} (a gzip bomb, or a "
                                               f"larger export than allowed): raise ${MAX_DECOMPRESSED_ENV} "
                                               "to load it, or split it")
                dst.write(chunk)
    except (OSError, EOFError, zlib.error) as exc:  # zlib.error: a corrupt deflate stream
        raise IngestError(display, f"gzip data is corrupt or truncated ({exc})") from None
    return out


_ENCODING_NAMES = {"utf-16": "with a byte-order mark", "utf-16-le": "little-endian, no byte-order mark",
                   "utf-16-be": "big-endian, no byte-order mark"}
_TEXT_BYTES = frozenset(b"\t\n\r" + bytes(range(0x20, 0x7F)) + bytes(range(0xA0, 0x100)))  # Latin-1 text


def utf16_encoding(head: bytes) -> str | None:
    """``utf-16`` for a head starting with a UTF-16 BOM, ``utf-16-le``/``-be`` for one whose every other
    byte is NUL and the others printable Latin-1 (text a BOM-less writer left), else None."""
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "utf-16"
    units = len(head) // 2
    if units < 8:
        return None
    for encoding, nul, chars in (("utf-16-le", head[1::2], head[0::2]), ("utf-16-be", head[0::2], head[1::2])):
        if nul[:units].count(0) == units and all(b in _TEXT_BYTES for b in chars[:units]):
            return encoding
    return None


def _to_utf8(src: Source, encoding: str, tmp: Path) -> Path:
    out = tmp / ("utf8-" + src.path.name)
    decoder = codecs.getincrementaldecoder(encoding)()
    done = 0
    try:
        with src.path.open("rb") as fh, out.open("w", encoding="utf-8", newline="") as dst:
            while chunk := fh.read(1 << 20):
                dst.write(decoder.decode(chunk))
                done += len(chunk)
            dst.write(decoder.decode(b"", final=True))
    except UnicodeDecodeError as exc:
        raise IngestError(src.display, f"looks like UTF-16 text ({_ENCODING_NAMES[encoding]}) but does not decode "
                                       f"at byte {done + exc.start} ({exc.reason}: a damaged or truncated file?)"
                          ) from None
    return out


def _readers() -> dict[str, Callable[[duckdb.DuckDBPyConnection, Source], Staged]]:
    return {
        "prometheus-text": text.read,
        "openmetrics": text.read,
        "prometheus-api-json": promjson.read,
        "victoriametrics-jsonl": vmjson.read,
        "promtool-dump": promtool.read,
        "csv": longform.read_csv,
        "parquet": longform.read_parquet,
        "aiperf-server-metrics": aiperf.read,
    }


def stage(con: duckdb.DuckDBPyConnection, src: Source, check: bool = True) -> Staged:
    """Detect the format of ``src`` and create ``stage_keys``/``stage_points``/``stage_families``, then
    (unless ``check`` is false: the readers' own tests compare what a reader parsed) drop, repair or
    note what no number may be computed from (``app.ingest.checks``)."""
    sql.ensure_macros(con)  # the readers' queries call them (macros/timestamps)
    drop_temp(con, "stage_points")  # a table or a view: each reader makes its own kind
    fmt = detect(src)
    staged = _readers()[fmt](con, src)
    staged.gzip = src.gzip
    staged.notes[:0] = src.notes
    if check:
        checks.check(con, src, staged)
    return staged


__all__ = ["FORMATS", "MAX_DECOMPRESSED_ENV", "IngestError", "Source", "Staged", "max_decompressed", "open_source",
           "stage"]
