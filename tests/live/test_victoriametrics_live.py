"""Headroom against a real VictoriaMetrics (Debian's ``victoria-metrics``) holding the same data as a
file: imported through its ``/api/v1/import``, read back with ``headroom fetch`` (the instant query
``SELECTOR[chunk]`` returns VictoriaMetrics' raw samples, as Prometheus'), loaded, and the cube equals
the file's cube: cell for cell but for the histograms' `_sum`, which VictoriaMetrics stores as a decimal
(within 1e-9 relative)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from app import cli, load
from app.cube import cube_frame, ensure_cube
from app.store import Workspace
from tests.support.live_fleet import E0, WHOLE, fleet_frame
from tests.support.servers import victoria_metrics

pytestmark = pytest.mark.prometheus


@pytest.fixture(scope="module")
def vm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, pd.DataFrame]]:
    frame = fleet_frame()
    with victoria_metrics(tmp_path_factory.mktemp("vm"), frame) as url:
        yield url, frame


def test_victoriametrics_read_live_gives_the_file_cube(vm: tuple[str, pd.DataFrame], tmp_path: Path) -> None:
    url, frame = vm
    out = tmp_path / "live.parquet"
    assert cli.main(["fetch", "--prometheus", url, "--start", str(E0 - 60), "--end", str(E0 + WHOLE),
                     "--chunk", "30m", "--out", str(out), "--quiet"]) == 0
    with Workspace(":memory:") as ws:
        live = load.load_file(ws, out)
        assert live.status == "loaded", live.errors
        assert live.samples == len(frame)
        file = load.load_frame(ws, frame, "file")
        for window_s in (300, 60):
            got = cube_frame(ws, ensure_cube(ws, [live.dataset_id], window_s, ["model_name"]))
            want = cube_frame(ws, ensure_cube(ws, [file.dataset_id], window_s, ["model_name"]))
            # VictoriaMetrics keeps a float as a decimal mantissa and exponent: a histogram's `_sum` (not an
            # integer) comes back within 1e-10 of what was imported (measured: at most 1.3e-10 relative);
            # every count, bucket and gauge is exact
            sums = (want["stat"] == "sum").to_numpy()
            pd.testing.assert_frame_equal(got[~sums], want[~sums], check_exact=True)
            pd.testing.assert_frame_equal(got[sums], want[sums], check_exact=False, rtol=1e-9)
            assert sums.any() and (~sums).sum() > 10 * sums.sum()
