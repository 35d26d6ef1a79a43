-- name: cube__bucket_bounds
-- purpose: the finite bucket bounds (seconds) of each histogram signal of a cube, for the notes that
--   name the bounds next to a threshold
-- grain: one row per (signal, le)
-- reads: cube_rows
-- @param cube_id INTEGER  a cube of cube_index
-- @returns signal VARCHAR, le DOUBLE
select distinct signal, le
from cube_rows
where cube_id = $cube_id and stat = 'increase' and le is not null and isfinite(le)
order by signal, le
