-- name: cube__series_for_build
-- purpose: the series of cube_series whose windows a cube of some signals sums: every series but the
--   bucket series of a histogram whose signal is not in $buckets. The capacity fit reads only the
--   count and sum of its latency histograms (TTFT, TPOT, queue, prefill), which are most of its
--   series' windows. Taken after the windows are computed from every series of a label set, so its
--   resets (a decrease of any bucket or of `_count`) are the full cube's.
-- grain: one row per (series_id, signal, path), as cube_series
-- reads: cube_series
-- @param buckets VARCHAR[]  the histograms whose bucket series are kept
-- @returns series_id UBIGINT, signal VARCHAR, kind VARCHAR, scale DOUBLE, suffix VARCHAR,
--   le DOUBLE, group_id UBIGINT, replica VARCHAR, path VARCHAR, engine VARCHAR, family VARCHAR,
--   prefix VARCHAR
select *
from cube_series
where not (kind = 'histogram' and suffix = 'bucket') or list_contains($buckets, signal)
