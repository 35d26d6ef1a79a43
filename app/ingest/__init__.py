"""Ingest: detect a file's format from its content and stage its samples in DuckDB.

One module per format; each exposes ``read(con, src) -> Staged`` meeting the contract in
``app.ingest.base``. ``stage(con, path)`` is the single entry point used by the store.
"""

from __future__ import annotations

import gzip
import shutil
import tempfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from app import sql
from app.ingest import aiperf, longform, promjson, promtool, text, vmjson
from app.ingest.base import FORMATS, IngestError, Source, Staged
from app.ingest.detect import detect

GZIP_MAGIC = b"\x1f\x8b"


@contextmanager
def open_source(path: Path, display: str | None = None) -> Iterator[Source]:
    """Yield a ``Source`` for ``path``, decompressing gzip (detected by its magic bytes) to a temp file."""
    display = display or path.name
    if not path.is_file():
        raise IngestError(display, "no such file")
    with path.open("rb") as fh:
        magic = fh.read(2)
    if magic != GZIP_MAGIC:
        yield Source(path=path, display=display, original=path)
        return
    with tempfile.TemporaryDirectory(prefix="headroom-gz-") as tmp:
        out = Path(tmp) / (path.name.removesuffix(".gz") or "data")
        try:
            with gzip.open(path, "rb") as src, out.open("wb") as dst:
                shutil.copyfileobj(src, dst, length=1 << 20)
        except (OSError, EOFError, zlib.error) as exc:  # zlib.error: a corrupt deflate stream
            raise IngestError(display, f"gzip data is corrupt or truncated ({exc})") from None
        yield Source(path=out, display=display, original=path, gzip=True)


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


def stage(con: duckdb.DuckDBPyConnection, src: Source) -> Staged:
    """Detect the format of ``src`` and create ``stage_keys``/``stage_points``/``stage_families``."""
    sql.ensure_macros(con)  # the readers' queries call them (macros/timestamps)
    fmt = detect(src)
    staged = _readers()[fmt](con, src)
    staged.gzip = src.gzip
    return staged


__all__ = ["FORMATS", "IngestError", "Source", "Staged", "open_source", "stage"]
