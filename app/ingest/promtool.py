"""``promtool tsdb dump`` (default ``prom`` format): ``{__name__="x", a="b"} value ts_ms`` per line.

The same vectorized parser as the text exposition reads it (``app.ingest.text``): its keys are
``{...}`` label sets whose ``__name__`` label names the metric, labels separated by ``", "``, values
printed with Go's ``%g`` (``NaN``, ``+Inf``, ``1e+06``) and timestamps in milliseconds. Native
histogram samples (printed as ``{count:…, sum:…, …}``) are skipped with a note.
(``promtool tsdb dump-openmetrics`` writes OpenMetrics text, read by the text reader.)
"""

from __future__ import annotations

import duckdb

from app.ingest.base import Source, Staged
from app.ingest.text import read_exposition


def read(con: duckdb.DuckDBPyConnection, src: Source) -> Staged:
    """Stage a promtool dump."""
    return read_exposition(con, src, dump=True)


__all__ = ["read"]
