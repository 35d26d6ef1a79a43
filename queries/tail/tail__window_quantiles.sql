-- name: tail__window_quantiles
-- purpose: per window and path, a quantile of each request-latency histogram (TTFT, TPOT, e2e,
--   queue time) as Prometheus' histogram_quantile computes it on classic buckets (docs/methods.md#quantile:
--   linear interpolation inside the bucket holding the rank, the lower edge 0 for the first bucket,
--   the highest finite bound when the rank falls in +Inf), with the hard interval of the bucket it
--   falls in (any within-bucket distribution): the tail over time without averaging windows
-- grain: one row per (window_start, path, signal) with observations
-- reads: cube_rows
-- @param cube_id INTEGER  a cube of cube_rows
-- @param start_ts TIMESTAMP  first window start included
-- @param end_ts TIMESTAMP  windows starting at or after this are excluded
-- @param quantile DOUBLE  the quantile, in (0, 1)
-- @returns window_start TIMESTAMP, path VARCHAR, signal VARCHAR, n DOUBLE, value_s DOUBLE, low_s DOUBLE,
--   high_s DOUBLE
with
buckets as (
    select window_start, path, signal, le, value as c
    from cube_rows
    where cube_id = $cube_id
      and stat = 'increase'
      and le is not null
      and signal in ('ttft', 'tpot', 'e2e', 'queue')
      and window_start >= $start_ts
      and window_start < $end_ts
),

ranked as (
    select
        window_start,
        path,
        signal,
        le,
        c,
        max(c) filter (where le = 'inf'::double) over (partition by window_start, path, signal) as n,
        lag(le) over (partition by window_start, path, signal order by le) as le_prev,
        lag(c) over (partition by window_start, path, signal order by le) as c_prev
    from buckets
),

holding as (
    -- the first bucket whose cumulative count reaches the rank
    select
        window_start,
        path,
        signal,
        any_value(n) as n,
        arg_min(le, le) as le,
        arg_min(c, le) as c,
        arg_min(coalesce(le_prev, 0.0), le) as le_lo,
        arg_min(coalesce(c_prev, 0.0), le) as c_lo
    from ranked
    where n > 0 and c >= $quantile * n
    group by window_start, path, signal
),

final as (
    select
        window_start,
        path,
        signal,
        n,
        case
            when not isfinite(le) then le_lo
            when c = c_lo then le
            else le_lo + (le - le_lo) * ($quantile * n - c_lo) / (c - c_lo)
        end as value_s,
        le_lo as low_s,
        le as high_s
    from holding
    order by path, signal, window_start
)

select * from final
