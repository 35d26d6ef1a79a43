-- name: cube__requests_by_window
-- purpose: requests per window and path from a cached cube: first tokens (TTFT `_count` increase)
--   where the engine exports TTFT, else finished requests; and the replicas reporting
-- grain: one row per (window_start, path)
-- reads: cube_rows
-- @param cube_id INTEGER  a cube of cube_rows
-- @returns window_start TIMESTAMP, path VARCHAR, requests DOUBLE, replicas DOUBLE
with
rows_ as (
    select * from cube_rows where cube_id = $cube_id
),

ttft as (
    select window_start, path, value as requests from rows_ where signal = 'ttft' and stat = 'count'
),

finished as (
    select window_start, path, value as requests
    from rows_
    where signal = 'requests' and stat = 'increase'
),

replicas as (
    select window_start, path, value as replicas from rows_ where stat = 'replicas'
),

final as (
    select
        r.window_start,
        r.path,
        coalesce(t.requests, f.requests) as requests,
        r.replicas
    from replicas as r
    left join ttft as t using (window_start, path)
    left join finished as f using (window_start, path)
    where coalesce(t.requests, f.requests) is not null
    order by r.window_start, r.path
)

select * from final
