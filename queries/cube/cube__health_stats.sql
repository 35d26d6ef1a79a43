-- name: cube__health_stats
-- purpose: the data health of a cube: counter resets and repaired (non-monotone) buckets per window,
--   path and signal, where there were any
-- grain: one row per (window_start, path, signal, stat) with a value above 0
-- reads: cube_rows
-- @param cube_id INTEGER  a cube of cube_index
-- @returns window_start TIMESTAMP, path VARCHAR, signal VARCHAR, stat VARCHAR, value DOUBLE
select window_start, path, signal, stat, value
from cube_rows
where cube_id = $cube_id and stat in ('resets', 'repairs') and value > 0
order by window_start, path, signal
