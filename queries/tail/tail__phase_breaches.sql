-- name: tail__phase_breaches
-- purpose: per window and path, how many observations of each phase histogram lie above the
--   threshold of the breach they may explain: TTFT, queue time and prefill time above the path's
--   TTFT threshold (breach `ttft`); e2e, queue, prefill and decode time above its e2e threshold
--   (breach `e2e`). Estimate (linear interpolation inside the bucket holding the threshold) and
--   the hard bounds from the neighbouring bucket bounds (macros/breach, docs/methods.md#share-above-threshold), as
--   counts so that windows add up. n is the +Inf bucket (the `_count` increase when it is missing).
-- grain: one row per (window_start, path, breach, signal) where the histogram has buckets
-- reads: cube_rows
-- @param cube_id INTEGER  a cube of cube_rows
-- @param start_ts TIMESTAMP  first window start included
-- @param end_ts TIMESTAMP  windows starting at or after this are excluded
-- @param paths VARCHAR[]  the paths to read, in the order of the threshold lists
-- @param ttft_s DOUBLE[]  each path's TTFT threshold (seconds; NULL: none)
-- @param e2e_s DOUBLE[]  each path's end-to-end threshold (seconds; NULL: none)
-- @returns window_start TIMESTAMP, path VARCHAR, breach VARCHAR, signal VARCHAR, threshold_s DOUBLE,
--   n DOUBLE, bad DOUBLE, bad_low DOUBLE, bad_high DOUBLE, exact BOOLEAN
with
path_thresholds as (
    select
        unnest($paths::varchar[]) as path,
        unnest($ttft_s::double[]) as ttft_s,
        unnest($e2e_s::double[]) as e2e_s
),

wanted as (
    select path, 'ttft' as breach, unnest(['ttft', 'queue', 'prefill']) as signal, ttft_s as threshold_s
    from path_thresholds
    where ttft_s is not null
    union all
    select path, 'e2e', unnest(['e2e', 'queue', 'prefill', 'decode']), e2e_s
    from path_thresholds
    where e2e_s is not null
),

rows_ as (
    select r.window_start, r.path, w.breach, r.signal, w.threshold_s as t, r.le, r.stat, r.value
    from cube_rows as r
    inner join wanted as w on w.path = r.path and w.signal = r.signal
    where r.cube_id = $cube_id
      and r.stat in ('increase', 'count')
      and r.window_start >= $start_ts
      and r.window_start < $end_ts
),

picked as (
    select
        window_start,
        path,
        breach,
        signal,
        any_value(t) as t,
        coalesce(
            max(value) filter (where stat = 'increase' and le = 'inf'::double),
            max(value) filter (where stat = 'count')
        ) as n,
        max(value) filter (where stat = 'increase' and abs(le - t) <= 1e-9 * t) as c_at,
        max(le) filter (where stat = 'increase' and le < t - 1e-9 * t) as le_lo,
        arg_max(value, le) filter (where stat = 'increase' and le < t - 1e-9 * t) as c_lo,
        min(le) filter (where stat = 'increase' and le > t + 1e-9 * t and isfinite(le)) as le_hi,
        arg_min(value, le) filter (where stat = 'increase' and le > t + 1e-9 * t and isfinite(le)) as c_hi,
        count(*) filter (where stat = 'increase' and le is not null) as buckets
    from rows_
    group by window_start, path, breach, signal
),

final as (
    select
        window_start,
        path,
        breach,
        signal,
        t as threshold_s,
        n,
        coalesce(breached_estimate(n, t, c_at, le_lo, c_lo, le_hi, c_hi), 0.0) as bad,
        coalesce(breached_low(n, c_at, c_hi), 0.0) as bad_low,
        coalesce(breached_high(n, c_at, c_lo), 0.0) as bad_high,
        c_at is not null as exact
    from picked
    where buckets > 0
    order by path, breach, signal, window_start
)

select * from final
