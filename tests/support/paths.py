"""Where things are, for a test at any depth of ``tests/``."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent  # the checkout
FIXTURES = TESTS / "fixtures"
REAL = FIXTURES / "real"  # files from public repositories and real runs, each folder's SOURCES.md says whence
SAMPLE = ROOT / "data" / "sample" / "metrics.parquet"  # the bundled day
