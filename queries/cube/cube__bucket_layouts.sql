-- name: cube__bucket_layouts
-- purpose: the distinct bucket layouts (ascending bounds) of each latency histogram of a cube, per
--   path, numbered. One layout per histogram unless an engine upgrade changed the buckets part-way;
--   a promise finds the position of the bounds around its threshold once per layout. A histogram
--   with a `_count` but no buckets has the empty layout (its path still counts requests).
-- grain: one row per (path, signal, les); reads the temp table `promise_lists` (cube__promise_lists)
-- reads: promise_lists
-- @param cube_id INTEGER  the cube the lists were gathered from
-- @returns cube_id INTEGER, path VARCHAR, signal VARCHAR, layout_id INTEGER, les DOUBLE[]
select
    $cube_id::integer as cube_id,
    path,
    signal,
    (row_number() over (order by path, signal, les))::integer as layout_id,
    les
from (
    select distinct path, signal, coalesce(les, []::double[]) as les
    from promise_lists
    where signal in ('ttft', 'tpot', 'itl', 'e2e', 'queue')
)
order by layout_id
