-- name: promise__layouts
-- purpose: the bucket layouts of a cube's latency histograms (cube_bucket_layouts), as app.promise.screen
--   reads them to build the running totals of the cube's per-window lists
-- grain: one row per (path, signal, layout_id)
-- reads: cube_bucket_layouts
-- @param cube_id INTEGER  a cube of cube_index
-- @returns path VARCHAR, signal VARCHAR, layout_id INTEGER, les DOUBLE[]
select path, signal, layout_id, les
from cube_bucket_layouts
where cube_id = $cube_id
order by path, signal, layout_id
