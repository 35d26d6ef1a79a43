-- name: cube__series_of_signals
-- purpose: the rows of cube_series whose signal is one of $signals: a cube of only those signals
--   (the demand's, the capacity fit's) windows only their samples. Every series of a kept signal
--   stays, so a histogram's label set keeps all its buckets and its resets (counted per label set)
--   are those of the full cube; the kept signals' rows are the full cube's, except `replicas`, which
--   counts the replicas reporting a kept signal.
-- grain: one row per (series_id, signal, path), as cube_series
-- reads: cube_series
-- @param signals VARCHAR[]  the canonical signals to keep
-- @returns series_id UBIGINT, signal VARCHAR, kind VARCHAR, scale DOUBLE, suffix VARCHAR,
--   le DOUBLE, group_id UBIGINT, replica VARCHAR, path VARCHAR, engine VARCHAR, family VARCHAR,
--   prefix VARCHAR
select *
from cube_series
where list_contains($signals, signal)
