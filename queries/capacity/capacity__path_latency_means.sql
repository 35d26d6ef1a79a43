-- name: capacity__path_latency_means
-- purpose: per path, the `_sum` and `_count` increases of the latency histograms over a cube's whole
--   range (their ratio is the mean latency); the twin's calibration and residual read them
-- grain: one row per (path, signal)
-- reads: cube_rows
-- @param cube_id INTEGER  the cube to read
-- @returns path VARCHAR, signal VARCHAR, sum DOUBLE, count DOUBLE
with
totals as (
    select path, signal, stat, value
    from cube_rows
    where cube_id = $cube_id and stat in ('sum', 'count') and signal in ('ttft', 'tpot', 'itl', 'queue', 'e2e')
),

final as (
    select
        path,
        signal,
        sum(value) filter (where stat = 'sum') as sum,
        sum(value) filter (where stat = 'count') as count
    from totals
    group by path, signal
    order by path, signal
)

select * from final
