-- name: cube__bucket_layout
-- purpose: the bucket bounds of each histogram of a cube, per path, and whether each bound is
--   present in every window where that histogram has buckets. When a layout is the same in every
--   window, a promise reads only the bounds around its threshold (+Inf, the threshold, the nearest
--   bound below and above); when an engine upgrade changed the layout part-way, it reads them all.
-- grain: one row per (path, signal, le)
-- @param cube_id INTEGER  a cube of cube_rows
-- @returns cube_id INTEGER, path VARCHAR, signal VARCHAR, le DOUBLE, in_every_window BOOLEAN
with
bucket_rows as (
    select window_start, path, signal, le
    from cube_rows
    where cube_id = $cube_id and stat = 'increase' and le is not null
),

per_bound as (
    select path, signal, le, count(*) as windows
    from bucket_rows
    group by path, signal, le
),

per_histogram as (
    select path, signal, count(distinct window_start) as windows
    from bucket_rows
    group by path, signal
)

select
    $cube_id::integer as cube_id,
    b.path,
    b.signal,
    b.le,
    b.windows = h.windows as in_every_window
from per_bound as b
inner join per_histogram as h using (path, signal)
order by b.path, b.signal, b.le
