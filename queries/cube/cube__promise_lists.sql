-- name: cube__promise_lists
-- purpose: the part of a cube a promise reads, gathered per (window, path, signal): for each latency
--   histogram (ttft, tpot, itl, e2e, queue) its bucket bounds and their cumulative increases as two
--   lists in ascending `le`, and its `_count` increase; for the request counters (requests,
--   failed_requests) their increase. A promise change then picks the bounds around its threshold by
--   position in each window's list (promise__shares) instead of aggregating bucket rows again.
-- grain: one row per (window_start, path, signal)
-- reads: cube_rows
-- @param cube_id INTEGER  a cube of cube_rows
-- @returns window_start TIMESTAMP, path VARCHAR, signal VARCHAR, les DOUBLE[], counts DOUBLE[],
--   value DOUBLE
with
buckets as (
    -- sorting (le, count) pairs per group is cheaper than two ordered aggregates
    select window_start, path, signal, list_sort(list(struct_pack(le := le, c := value))) as bounds
    from cube_rows
    where cube_id = $cube_id and stat = 'increase' and le is not null
        and signal in ('ttft', 'tpot', 'itl', 'e2e', 'queue')
    group by window_start, path, signal
),

totals as (
    select window_start, path, signal, value
    from cube_rows
    where cube_id = $cube_id and le is null and (
        (stat = 'count' and signal in ('ttft', 'tpot', 'itl', 'e2e', 'queue'))
        or (stat = 'increase' and signal in ('requests', 'failed_requests'))
    )
)

select
    coalesce(t.window_start, b.window_start) as window_start,
    coalesce(t.path, b.path) as path,
    coalesce(t.signal, b.signal) as signal,
    list_transform(b.bounds, lambda x: x.le) as les,
    list_transform(b.bounds, lambda x: x.c) as counts,
    t.value
from totals as t
full join buckets as b on b.window_start = t.window_start and b.path = t.path and b.signal = t.signal
