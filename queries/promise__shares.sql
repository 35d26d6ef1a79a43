-- name: promise__shares
-- purpose: per path (over the whole range, or per window) the breach share of each promise
--   threshold with honest bounds, and the joint promise. For TTFT, TPOT, E2E and queue time: the
--   estimate (linear interpolation inside the bucket holding the threshold, methods.md 1.4), the
--   hard bounds from the neighbouring bucket bounds, and `exact` when the threshold is a bound.
--   TPOT is per request from the per-request TPOT histogram when the engine exports one (basis
--   `requests`); otherwise it is the inter-token latency share (basis `tokens`), and the request
--   share is only bounded: 0 <= request share <= ITL observations above the threshold / finished
--   requests (methods.md 3.2). The joint share (any set threshold breached, or the request failed)
--   is the Fréchet interval [max of the lows, min(1, sum of the highs)] (methods.md 3.1).
-- grain: one row per (window_start, path); window_start is NULL when $by_window is false
-- @param cube_id INTEGER  a cube of cube_rows
-- @param start_ts TIMESTAMP  first window start included
-- @param end_ts TIMESTAMP  windows starting at or after this are excluded
-- @param promises STRUCT[]  list of {path, ttft_s, tpot_s, e2e_s, queue_s, target}; path '*' = every path
-- @param by_window BOOLEAN  one row per window (true) or per path over the range (false)
-- @param include_failed BOOLEAN  count failed (abort/error) requests as breaches of the joint promise
-- @returns window_start TIMESTAMP, path VARCHAR, requests DOUBLE, failed_requests DOUBLE,
--   finished_requests DOUBLE, target DOUBLE,
--   ttft_threshold_s DOUBLE, ttft_share DOUBLE, ttft_low DOUBLE, ttft_high DOUBLE, ttft_exact BOOLEAN,
--   tpot_threshold_s DOUBLE, tpot_share DOUBLE, tpot_low DOUBLE, tpot_high DOUBLE, tpot_exact BOOLEAN,
--   tpot_basis VARCHAR,
--   e2e_threshold_s DOUBLE, e2e_share DOUBLE, e2e_low DOUBLE, e2e_high DOUBLE, e2e_exact BOOLEAN,
--   queue_threshold_s DOUBLE, queue_share DOUBLE, queue_low DOUBLE, queue_high DOUBLE, queue_exact BOOLEAN,
--   failed_share DOUBLE, joint_low DOUBLE, joint_high DOUBLE
with
promise_list as (
    select unnest(
        cast($promises as struct(
            path varchar, ttft_s double, tpot_s double, e2e_s double, queue_s double, target double
        )[]),
        recursive := true
    )
),

cube as (
    -- the counts and counters a promise reads (bucket rows come in `bucket_rows`, pruned). In the
    -- per-window form a cube row is already one per (window, path, signal, le, stat); over the range
    -- the windows are summed. `w` is the window, or $start_ts for the whole range, so that every
    -- join below is a plain equality.
    select window_start as w, path, signal, stat, value
    from cube_rows
    where $by_window and cube_id = $cube_id and window_start >= $start_ts and window_start < $end_ts
        and signal in ('ttft', 'tpot', 'itl', 'e2e', 'queue', 'requests', 'failed_requests')
        and le is null and stat in ('count', 'increase')
    union all
    select $start_ts::timestamp as w, path, signal, stat, sum(value) as value
    from cube_rows
    where not $by_window and cube_id = $cube_id and window_start >= $start_ts and window_start < $end_ts
        and signal in ('ttft', 'tpot', 'itl', 'e2e', 'queue', 'requests', 'failed_requests')
        and le is null and stat in ('count', 'increase')
    group by path, signal, stat
),

request_paths as (
    -- paths with request-level histograms (engine-level gauge paths have none)
    select distinct path from cube where signal in ('ttft', 'tpot', 'itl', 'e2e', 'queue') and stat = 'count'
),

path_promise as (
    select
        rp.path,
        coalesce(own.ttft_s, star.ttft_s) as ttft_s,
        coalesce(own.tpot_s, star.tpot_s) as tpot_s,
        coalesce(own.e2e_s, star.e2e_s) as e2e_s,
        coalesce(own.queue_s, star.queue_s) as queue_s,
        coalesce(own.target, star.target, 0.99) as target
    from request_paths as rp
    left join promise_list as own on own.path = rp.path
    left join promise_list as star on star.path = '*'
    where own.path is not null or star.path is not null
),

thresholds as (
    select path, 'ttft' as signal, ttft_s as threshold from path_promise where ttft_s is not null
    union all
    select path, 'tpot', tpot_s from path_promise where tpot_s is not null
    union all
    select path, 'itl', tpot_s from path_promise where tpot_s is not null
    union all
    select path, 'e2e', e2e_s from path_promise where e2e_s is not null
    union all
    select path, 'queue', queue_s from path_promise where queue_s is not null
),

keyed as (
    -- a small integer per (path, signal) threshold: the per-window aggregate groups on it
    select row_number() over (order by path, signal) as k, path, signal, threshold from thresholds
),

layout as (
    select
        t.k,
        t.path,
        t.signal,
        t.threshold,
        l.le,
        bool_and(l.in_every_window) over (partition by t.k) as uniform,
        max(l.le) filter (where l.le < t.threshold - 1e-9 * t.threshold) over (partition by t.k) as le_below,
        min(l.le) filter (where l.le > t.threshold + 1e-9 * t.threshold and isfinite(l.le))
            over (partition by t.k) as le_above
    from keyed as t
    inner join cube_bucket_layout as l on l.cube_id = $cube_id and l.path = t.path and l.signal = t.signal
),

read_bounds as (
    -- the bounds a threshold reads: +Inf, the threshold, the nearest below and above; every bound
    -- when the layout is not the same in every window (cube__bucket_layout)
    select k, path, signal, threshold, le
    from layout
    where not uniform or le = 'inf'::double or abs(le - threshold) <= 1e-9 * threshold
        or le = le_below or le = le_above
),

bucket_rows as (
    select r.window_start as w, b.k, b.threshold, r.le, r.value
    from cube_rows as r
    inner join read_bounds as b on b.path = r.path and b.signal = r.signal and b.le = r.le
    where $by_window and r.cube_id = $cube_id and r.window_start >= $start_ts and r.window_start < $end_ts
        and r.stat = 'increase'
    union all
    select $start_ts::timestamp as w, b.k, any_value(b.threshold), r.le, sum(r.value) as value
    from cube_rows as r
    inner join read_bounds as b on b.path = r.path and b.signal = r.signal and b.le = r.le
    where not $by_window and r.cube_id = $cube_id and r.window_start >= $start_ts and r.window_start < $end_ts
        and r.stat = 'increase'
    group by b.k, r.le
),

hist_counts as (
    -- a histogram pasted without its +Inf bucket still has _count
    select w, path, signal, value as n_count
    from cube
    where stat = 'count' and signal in ('ttft', 'tpot', 'itl', 'e2e', 'queue')
),

marginal_parts as (
    select
        m.w,
        t.path,
        t.signal,
        t.threshold,
        m.n_inf,
        m.c_at,
        m.le_lo,
        m.c_lo,
        m.le_hi,
        m.c_hi
    from (
        -- per window, the bounds around the threshold that the window has
        select
            w,
            k,
            max(value) filter (where le = 'inf'::double) as n_inf,
            max(value) filter (where abs(le - threshold) <= 1e-9 * threshold) as c_at,
            max(le) filter (where le < threshold - 1e-9 * threshold) as le_lo,
            arg_max(value, le) filter (where le < threshold - 1e-9 * threshold) as c_lo,
            min(le) filter (where le > threshold + 1e-9 * threshold and isfinite(le)) as le_hi,
            arg_min(value, le) filter (where le > threshold + 1e-9 * threshold and isfinite(le)) as c_hi
        from bucket_rows
        group by w, k
    ) as m
    inner join keyed as t using (k)
),

with_counts as (
    select p.*, coalesce(p.n_inf, k.n_count) as n
    from marginal_parts as p
    left join hist_counts as k on k.w = p.w and k.path = p.path and k.signal = p.signal
),

marginals as (
    select
        w,
        path,
        signal,
        threshold,
        n,
        breach_estimate(n, threshold, c_at, le_lo, c_lo, le_hi, c_hi) as share,
        breach_low(n, c_at, c_hi) as share_low,
        breach_high(n, c_at, c_lo) as share_high,
        c_at is not null as exact,
        -- observations above the threshold, at most (for the ITL request bound)
        n - coalesce(c_at, c_lo, 0) as above_high
    from with_counts
),

counters as (
    select
        w,
        path,
        sum(value) filter (where signal = 'ttft' and stat = 'count') as ttft_count,
        sum(value) filter (where signal = 'e2e' and stat = 'count') as e2e_count,
        sum(value) filter (where signal = 'tpot' and stat = 'count') as tpot_count,
        sum(value) filter (where signal = 'requests' and stat = 'increase') as finished,
        sum(value) filter (where signal = 'failed_requests' and stat = 'increase') as failed
    from cube
    where path in (select path from request_paths)
    group by w, path
),

pivoted as (
    select
        c.w,
        c.path,
        coalesce(c.ttft_count, c.e2e_count, c.tpot_count, c.finished) as requests,
        coalesce(c.failed, 0) as failed_requests,
        coalesce(c.finished, c.e2e_count, c.tpot_count, c.ttft_count) as finished_requests,
        pp.target,
        pp.ttft_s,
        pp.tpot_s,
        pp.e2e_s,
        pp.queue_s,
        ttft.share as ttft_share,
        ttft.share_low as ttft_low,
        ttft.share_high as ttft_high,
        ttft.exact as ttft_exact,
        tpot.share as tpot_share,
        tpot.share_low as tpot_low,
        tpot.share_high as tpot_high,
        tpot.exact as tpot_exact,
        itl.share as itl_share,
        itl.share_low as itl_low,
        itl.share_high as itl_high,
        itl.exact as itl_exact,
        itl.above_high as itl_above_high,
        e2e.share as e2e_share,
        e2e.share_low as e2e_low,
        e2e.share_high as e2e_high,
        e2e.exact as e2e_exact,
        queue.share as queue_share,
        queue.share_low as queue_low,
        queue.share_high as queue_high,
        queue.exact as queue_exact
    from counters as c
    inner join path_promise as pp on pp.path = c.path
    left join marginals as ttft
        on ttft.path = c.path and ttft.signal = 'ttft' and ttft.w = c.w
    left join marginals as tpot
        on tpot.path = c.path and tpot.signal = 'tpot' and tpot.w = c.w
    left join marginals as itl
        on itl.path = c.path and itl.signal = 'itl' and itl.w = c.w
    left join marginals as e2e
        on e2e.path = c.path and e2e.signal = 'e2e' and e2e.w = c.w
    left join marginals as queue
        on queue.path = c.path and queue.signal = 'queue'
        and queue.w = c.w
),

with_tpot as (
    select
        *,
        case when tpot_share is not null then 'requests' when itl_share is not null then 'tokens' end
            as tpot_basis,
        -- the request share the joint promise can use: per-request TPOT, or the ITL request bound
        case
            when tpot_share is not null then tpot_low
            when itl_share is not null then 0.0
        end as tpot_request_low,
        case
            when tpot_share is not null then tpot_high
            when itl_share is not null and finished_requests > 0
                then least(1.0, itl_above_high / finished_requests)
            when itl_share is not null then 1.0
        end as tpot_request_high,
        case
            when $include_failed and requests > 0 then least(1.0, failed_requests / requests)
            when $include_failed then null
            else 0.0
        end as failed_share
    from pivoted
),

final as (
    select
        case when $by_window then w end as window_start,
        path,
        requests,
        failed_requests,
        finished_requests,
        target,
        ttft_s as ttft_threshold_s,
        ttft_share,
        ttft_low,
        ttft_high,
        ttft_exact,
        tpot_s as tpot_threshold_s,
        coalesce(tpot_share, itl_share) as tpot_share,
        coalesce(tpot_low, itl_low) as tpot_low,
        coalesce(tpot_high, itl_high) as tpot_high,
        coalesce(tpot_exact, itl_exact) as tpot_exact,
        tpot_basis,
        e2e_s as e2e_threshold_s,
        e2e_share,
        e2e_low,
        e2e_high,
        e2e_exact,
        queue_s as queue_threshold_s,
        queue_share,
        queue_low,
        queue_high,
        queue_exact,
        failed_share,
        greatest(
            coalesce(ttft_low, 0), coalesce(tpot_request_low, 0), coalesce(e2e_low, 0),
            coalesce(queue_low, 0), coalesce(failed_share, 0)
        ) as joint_low,
        least(
            1.0,
            -- a threshold whose histogram the engine does not export leaves the joint open to 1
            coalesce(ttft_high, case when ttft_s is not null then 1.0 else 0.0 end)
            + coalesce(tpot_request_high, case when tpot_s is not null then 1.0 else 0.0 end)
            + coalesce(e2e_high, case when e2e_s is not null then 1.0 else 0.0 end)
            + coalesce(queue_high, case when queue_s is not null then 1.0 else 0.0 end)
            + coalesce(failed_share, 0)
        ) as joint_high
    from with_tpot
    where requests > 0
)

select * from final order by window_start nulls first, path
