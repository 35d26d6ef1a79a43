"""The exact breach shares of a simulated export, from its per-request records, on the population the
metrics can see — and the honest bounds a histogram report must satisfy against them.

Why the populations need care (app/simulator/records.py, app/engine/fleet.py):

- a crashed process takes with it what it observed since its last stored scrape: first tokens and
  finishes on that replica in (last scrape before the crash, crash] are in the records but in no
  histogram (``lost_first``, ``lost_finish``);
- TTFT is observed at the first token, TPOT at the finish: over a range (start, end] the TTFT
  histogram counts T = requests whose first token came in it, the TPOT histogram F = requests that
  finished in it. They differ at the edges (in flight at the end, started before the start) and by
  the requests lost in the crash. The Fréchet interval of two marginals is only a bound for one
  population; for a population P it widens by the members of T, F that are not in P and vice versa:

      |P ∩ (B1 ∪ B2)| >= max(|T ∩ B1| - |T \\ P|, |F ∩ B2| - |F \\ P|)
      |P ∩ (B1 ∪ B2)| <= |T ∩ B1| + |P \\ T| + |F ∩ B2| + |P \\ F|

  with |T ∩ B1| in [ttft_low, ttft_high] x |T| and |F ∩ B2| in [tpot_low, tpot_high] x |F| from
  the report. Only membership counts enter, never which requests breached.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from app.simulator.records import true_shares


def served_names(config: Mapping[str, Any]) -> dict[str, str]:
    """{record path: model_name of its request series} from a simulation description."""
    return {p["name"]: p["served_name"] for p in config["traffic"]["paths"]}


def last_scrape_before(metrics_parquet: Path, instance: str, t: pd.Timestamp) -> pd.Timestamp:
    """The last stored scrape of a target before ``t``, read straight from the Parquet export."""
    con = duckdb.connect()
    try:
        (ts,) = con.execute(
            "select max(timestamp) from read_parquet($p) where labels like $inst and timestamp < $t",
            {"p": str(metrics_parquet), "inst": f'%"instance": "{instance}"%', "t": t.to_pydatetime()},
        ).fetchone()
    finally:
        con.close()
    return pd.Timestamp(ts).tz_convert("UTC") if pd.Timestamp(ts).tzinfo else pd.Timestamp(ts, tz="UTC")


@dataclass
class Populations:
    """Boolean masks over the records (one row per request)."""

    first_seen: pd.Series  # T: first token in (start, end] and observed by a stored scrape
    finish_seen: pd.Series  # F: finished (not lost) in (start, end] and observed by a stored scrape
    lost_first: pd.Series  # first token died with a crashed process before any scrape stored it
    lost_finish: pd.Series  # finish died the same way


def populations(records: pd.DataFrame, config: Mapping[str, Any], metrics_parquet: Path,
                start: pd.Timestamp, end: pd.Timestamp) -> Populations:
    lost_first = pd.Series(False, index=records.index)
    lost_finish = pd.Series(False, index=records.index)
    for restart in config["restarts"]:
        crash = pd.Timestamp(restart["crash"])
        last = last_scrape_before(metrics_parquet, f"10.0.0.{restart['replica'] + 1}:8000", crash)
        on = records["replica"] == restart["replica"]
        lost_first |= on & (records["first_token"] > last) & (records["first_token"] <= crash)
        lost_finish |= on & (records["finish"] > last) & (records["finish"] <= crash)
    first = (records["first_token"] > start) & (records["first_token"] <= end) & ~lost_first
    done = records["finished_reason"].notna() & ~records["lost"]
    finish = done & (records["finish"] > start) & (records["finish"] <= end) & ~lost_finish
    return Populations(first_seen=first, finish_seen=finish, lost_first=lost_first, lost_finish=lost_finish)


def observed_shares(records: pd.DataFrame, pops: Populations, thresholds: Mapping[str, tuple[float, float]],
                    start: pd.Timestamp, end: pd.Timestamp) -> pd.DataFrame:
    """``true_shares`` over the whole range on the population the metrics saw: TTFT by first token
    (without the first tokens lost in the crash), TPOT and joint by finish (without lost finishes).
    One row per record path; columns of ``true_shares``."""
    ttft = true_shares(records[~pops.lost_first], None, thresholds, start=start, end=end).set_index("path")
    tpot = true_shares(records[~pops.lost_finish], None, thresholds, start=start, end=end).set_index("path")
    out = tpot.copy()
    for col in ("first_tokens", "ttft_breached", "ttft_share"):
        out[col] = ttft[col]
    return out


def population_bounds(doc: Mapping[str, Any], first_seen: pd.Series, finish_seen: pd.Series,
                      target: pd.Series) -> tuple[float, float]:
    """Bounds on the joint breach share over the records ``target`` implied by the report's marginals
    ``doc`` (one path of ``headroom report``) and membership counts only; ``first_seen`` and
    ``finish_seen`` are that path's T and F."""
    t, f = first_seen, finish_seen
    n_t, n_f, n_p = int(t.sum()), int(f.sum()), int(target.sum())
    t_not_p, f_not_p = int((t & ~target).sum()), int((f & ~target).sum())
    p_not_t, p_not_f = int((target & ~t).sum()), int((target & ~f).sum())
    ttft, tpot = doc["ttft"], doc["tpot"]
    low = max(ttft["share_low"] * n_t - t_not_p, tpot["share_low"] * n_f - f_not_p, 0.0) / n_p
    high = min(1.0, (ttft["share_high"] * n_t + p_not_t + tpot["share_high"] * n_f + p_not_f) / n_p)
    return low, high
