-- name: promise__shares
-- purpose: per path (over the whole range, or per window) the breach share of each promise
--   threshold with honest bounds, and the joint promise; per window also the burn rate and the
--   multiwindow burn-rate alerts (those of promise__burn_alerts, in the same pass).
--   For TTFT, TPOT, E2E and queue time: the
--   estimate (linear interpolation inside the bucket holding the threshold, docs/methods.md#share-above-threshold), the
--   hard bounds from the neighbouring bucket bounds, and `exact` when the threshold is a bound.
--   TPOT is per request from the per-request TPOT histogram when the engine exports one (basis
--   `requests`); otherwise it is the inter-token latency share (basis `tokens`), and the request
--   share is only bounded: 0 <= request share <= ITL observations above the threshold / finished
--   requests (docs/methods.md#tpot-basis). The joint share (any set threshold breached, or the request failed)
--   is the Fréchet interval [max of the lows, min(1, sum of the highs)] (docs/methods.md#frechet).
--   Per window and path, each threshold's breach counts (estimate and bounds, macros/breach) come
--   from the bounds around it, picked by position in that window's own bucket layout
--   (cube__window_histograms); over a range the windows' counts add up (interpolation is linear in
--   the counts), so a layout changed part-way is right too, and `exact` means exact in every window
--   with observations. A histogram no promise sets a threshold for is not read.
--   Per window, the rows stream in the order cube_window_histograms stores them (path, time: no
--   sort), and the burn-rate columns are promise__burn_alerts' running totals taken over that
--   stream: the same numbers when the stream is its dense grid, i.e. each path's stored windows are
--   consecutive and its first and last stored windows have requests. `misfits` counts the stored
--   windows so far that break this (out of order, a missing window, an idle first or last one):
--   when the last row's is not 0, the caller sorts the rows and runs promise__burn_alerts on them.
--   The five histograms' blocks are written out, not shared: through struct macros, or one macro
--   per block, DuckDB repeats the list lookups at each use instead of sharing them, and one row per
--   (window, path, signal) needs an unpivot and a PIVOT back; both were slower than the repetition
--   (the commit that chose this has the timings).
-- grain: one row per path with a NULL window_start when $over_range (in no set order), and one per
--   (path, window_start) when $per_window, by path and time as stored (see `misfits`); ask for one
--   of the two
-- reads: cube_bucket_layouts, cube_window_histograms
-- @param cube_id INTEGER  a cube of cube_rows
-- @param start_ts TIMESTAMP  first window start included
-- @param end_ts TIMESTAMP  windows starting at or after this are excluded
-- @param promises STRUCT[]  list of {path, ttft_s, tpot_s, e2e_s, queue_s, target}; path '*' = every path
-- @param per_window BOOLEAN  return one row per window and path
-- @param over_range BOOLEAN  return one row per path over the whole range
-- @param include_failed BOOLEAN  count failed (abort/error) requests as breaches of the joint promise
-- @param paths VARCHAR[]  only these paths (NULL: every path)
-- @param window_s INTEGER  the cube's window length in seconds
-- @param fast_factor DOUBLE  burn factor of the 1 h / 5 min page
-- @param slow_factor DOUBLE  burn factor of the 6 h / 30 min page
-- @param ticket_factor DOUBLE  burn factor of the 3 d / 6 h ticket
-- @returns window_start TIMESTAMP, path VARCHAR, requests DOUBLE, failed_requests DOUBLE,
--   finished_requests DOUBLE, target DOUBLE,
--   ttft_threshold_s DOUBLE, ttft_share DOUBLE, ttft_low DOUBLE, ttft_high DOUBLE, ttft_exact BOOLEAN,
--   tpot_threshold_s DOUBLE, tpot_share DOUBLE, tpot_low DOUBLE, tpot_high DOUBLE, tpot_exact BOOLEAN,
--   tpot_basis VARCHAR,
--   e2e_threshold_s DOUBLE, e2e_share DOUBLE, e2e_low DOUBLE, e2e_high DOUBLE, e2e_exact BOOLEAN,
--   queue_threshold_s DOUBLE, queue_share DOUBLE, queue_low DOUBLE, queue_high DOUBLE, queue_exact BOOLEAN,
--   failed_share DOUBLE, joint_low DOUBLE, joint_high DOUBLE,
--   burn_low DOUBLE, burn_high DOUBLE, page_1h VARCHAR, page_6h VARCHAR, ticket_3d VARCHAR,
--   misfits BIGINT
with
promise_list as (
    select unnest(
        cast($promises as struct(
            path varchar, ttft_s double, tpot_s double, e2e_s double, queue_s double, target double
        )[]),
        recursive := true
    )
),

promised_paths as (
    -- the request paths (macro request_paths: with a request-level histogram), or those asked for
    select path from request_paths($cube_id) where $paths is null or list_contains($paths, path)
),

path_promise as (
    select
        rp.path,
        coalesce(own.ttft_s, star.ttft_s) as ttft_s,
        coalesce(own.tpot_s, star.tpot_s) as tpot_s,
        coalesce(own.e2e_s, star.e2e_s) as e2e_s,
        coalesce(own.queue_s, star.queue_s) as queue_s,
        coalesce(own.target, star.target, 0.99) as target,
        row_number() over (order by rp.path) as path_code  -- sorts the output cheaper than the name
    from promised_paths as rp
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

positions as (
    -- per layout with a threshold, where +Inf, the threshold and its nearest bounds below and above
    -- sit in the layout's lists (every window of that layout reads them by position)
    select
        l.layout_id,
        struct_pack(
            threshold := any_value(t.threshold),
            i_inf := max(b.i) filter (where b.le = 'inf'::double),
            i_at := max(b.i) filter (where abs(b.le - t.threshold) <= 1e-9 * t.threshold),
            le_lo := max(b.le) filter (where b.le < t.threshold - 1e-9 * t.threshold),
            i_lo := arg_max(b.i, b.le) filter (where b.le < t.threshold - 1e-9 * t.threshold),
            le_hi := min(b.le) filter (where b.le > t.threshold + 1e-9 * t.threshold and isfinite(b.le)),
            i_hi := arg_min(b.i, b.le) filter (where b.le > t.threshold + 1e-9 * t.threshold and isfinite(b.le))
        ) as pos
    from thresholds as t
    inner join cube_bucket_layouts as l on l.cube_id = $cube_id and l.path = t.path and l.signal = t.signal,
        unnest(l.les) with ordinality as b(le, i)
    group by l.layout_id
),

picked as not materialized (
    -- (inlined into window_counts, its one reader)
    -- each histogram's n (+Inf, or _count when the +Inf bucket is missing) and the counts at its
    -- threshold's bounds in this window's layout
    select
        r.window_start,
        (epoch(r.window_start) // $window_s)::bigint as slot,
        r.path,
        pp.target,
        pp.path_code,
        pp.ttft_s,
        pp.tpot_s,
        pp.e2e_s,
        pp.queue_s,
        r.ttft_count,
        r.e2e_count,
        r.tpot_count,
        r.finished,
        r.failed,
        pt.pos.threshold as ttft_t,
        coalesce(r.ttft_counts[pt.pos.i_inf], r.ttft_count) as ttft_n,
        r.ttft_counts[pt.pos.i_at] as ttft_c_at,
        pt.pos.le_lo as ttft_le_lo,
        r.ttft_counts[pt.pos.i_lo] as ttft_c_lo,
        pt.pos.le_hi as ttft_le_hi,
        r.ttft_counts[pt.pos.i_hi] as ttft_c_hi,
        pd.pos.threshold as tpot_t,
        coalesce(r.tpot_counts[pd.pos.i_inf], r.tpot_count) as tpot_n,
        r.tpot_counts[pd.pos.i_at] as tpot_c_at,
        pd.pos.le_lo as tpot_le_lo,
        r.tpot_counts[pd.pos.i_lo] as tpot_c_lo,
        pd.pos.le_hi as tpot_le_hi,
        r.tpot_counts[pd.pos.i_hi] as tpot_c_hi,
        pi.pos.threshold as itl_t,
        coalesce(r.itl_counts[pi.pos.i_inf], r.itl_count) as itl_n,
        r.itl_counts[pi.pos.i_at] as itl_c_at,
        pi.pos.le_lo as itl_le_lo,
        r.itl_counts[pi.pos.i_lo] as itl_c_lo,
        pi.pos.le_hi as itl_le_hi,
        r.itl_counts[pi.pos.i_hi] as itl_c_hi,
        pe.pos.threshold as e2e_t,
        coalesce(r.e2e_counts[pe.pos.i_inf], r.e2e_count) as e2e_n,
        r.e2e_counts[pe.pos.i_at] as e2e_c_at,
        pe.pos.le_lo as e2e_le_lo,
        r.e2e_counts[pe.pos.i_lo] as e2e_c_lo,
        pe.pos.le_hi as e2e_le_hi,
        r.e2e_counts[pe.pos.i_hi] as e2e_c_hi,
        pq.pos.threshold as queue_t,
        coalesce(r.queue_counts[pq.pos.i_inf], r.queue_count) as queue_n,
        r.queue_counts[pq.pos.i_at] as queue_c_at,
        pq.pos.le_lo as queue_le_lo,
        r.queue_counts[pq.pos.i_lo] as queue_c_lo,
        pq.pos.le_hi as queue_le_hi,
        r.queue_counts[pq.pos.i_hi] as queue_c_hi
    from (
        -- a histogram no promise sets a threshold for is not read (the condition is a constant
        -- of the statement, which DuckDB folds: the scan skips that list)
        select
            window_start, path, finished, failed,
            ttft_layout, ttft_count, tpot_layout, tpot_count, itl_layout, itl_count,
            e2e_layout, e2e_count, queue_layout, queue_count,
            case when list_bool_or(list_transform($promises, lambda p: p.ttft_s is not null)) then ttft_counts end
                as ttft_counts,
            case when list_bool_or(list_transform($promises, lambda p: p.tpot_s is not null)) then tpot_counts end
                as tpot_counts,
            case when list_bool_or(list_transform($promises, lambda p: p.tpot_s is not null)) then itl_counts end
                as itl_counts,
            case when list_bool_or(list_transform($promises, lambda p: p.e2e_s is not null)) then e2e_counts end
                as e2e_counts,
            case when list_bool_or(list_transform($promises, lambda p: p.queue_s is not null)) then queue_counts end
                as queue_counts
        from cube_window_histograms
        where cube_id = $cube_id and window_start >= $start_ts and window_start < $end_ts
    ) as r
    inner join path_promise as pp on pp.path = r.path
    left join positions as pt on pt.layout_id = r.ttft_layout
    left join positions as pd on pd.layout_id = r.tpot_layout
    left join positions as pi on pi.layout_id = r.itl_layout
    left join positions as pe on pe.layout_id = r.e2e_layout
    left join positions as pq on pq.layout_id = r.queue_layout
),

window_counts as (
    -- per window and path, how many observations breach each threshold; NULL without a threshold
    -- or without buckets in that window, `_n` NULL when the window has no observations.
    select
        window_start,
        slot,
        path,
        target,
        path_code,
        ttft_s,
        tpot_s,
        e2e_s,
        queue_s,
        ttft_count,
        e2e_count,
        tpot_count,
        finished,
        failed,
        case when ttft_t is not null and ttft_n > 0 then ttft_n end as ttft_n,
        case when ttft_t is not null
            then breached_estimate(ttft_n, ttft_t, ttft_c_at, ttft_le_lo, ttft_c_lo, ttft_le_hi, ttft_c_hi) end as ttft_bad,
        case when ttft_t is not null then breached_low(ttft_n, ttft_c_at, ttft_c_hi) end as ttft_bad_low,
        case when ttft_t is not null then breached_high(ttft_n, ttft_c_at, ttft_c_lo) end as ttft_bad_high,
        case when ttft_t is not null then ttft_c_at is not null end as ttft_exact,
        case when tpot_t is not null and tpot_n > 0 then tpot_n end as tpot_n,
        case when tpot_t is not null
            then breached_estimate(tpot_n, tpot_t, tpot_c_at, tpot_le_lo, tpot_c_lo, tpot_le_hi, tpot_c_hi) end as tpot_bad,
        case when tpot_t is not null then breached_low(tpot_n, tpot_c_at, tpot_c_hi) end as tpot_bad_low,
        case when tpot_t is not null then breached_high(tpot_n, tpot_c_at, tpot_c_lo) end as tpot_bad_high,
        case when tpot_t is not null then tpot_c_at is not null end as tpot_exact,
        case when itl_t is not null and itl_n > 0 then itl_n end as itl_n,
        case when itl_t is not null
            then breached_estimate(itl_n, itl_t, itl_c_at, itl_le_lo, itl_c_lo, itl_le_hi, itl_c_hi) end as itl_bad,
        case when itl_t is not null then breached_low(itl_n, itl_c_at, itl_c_hi) end as itl_bad_low,
        case when itl_t is not null then breached_high(itl_n, itl_c_at, itl_c_lo) end as itl_bad_high,
        case when itl_t is not null then itl_c_at is not null end as itl_exact,
        -- ITL observations above the threshold, at most (the request bound of a TPOT promise)
        case when itl_t is not null then itl_n - coalesce(itl_c_at, itl_c_lo, 0) end as itl_above_high,
        case when e2e_t is not null and e2e_n > 0 then e2e_n end as e2e_n,
        case when e2e_t is not null
            then breached_estimate(e2e_n, e2e_t, e2e_c_at, e2e_le_lo, e2e_c_lo, e2e_le_hi, e2e_c_hi) end as e2e_bad,
        case when e2e_t is not null then breached_low(e2e_n, e2e_c_at, e2e_c_hi) end as e2e_bad_low,
        case when e2e_t is not null then breached_high(e2e_n, e2e_c_at, e2e_c_lo) end as e2e_bad_high,
        case when e2e_t is not null then e2e_c_at is not null end as e2e_exact,
        case when queue_t is not null and queue_n > 0 then queue_n end as queue_n,
        case when queue_t is not null
            then breached_estimate(queue_n, queue_t, queue_c_at, queue_le_lo, queue_c_lo, queue_le_hi, queue_c_hi) end as queue_bad,
        case when queue_t is not null then breached_low(queue_n, queue_c_at, queue_c_hi) end as queue_bad_low,
        case when queue_t is not null then breached_high(queue_n, queue_c_at, queue_c_lo) end as queue_bad_high,
        case when queue_t is not null then queue_c_at is not null end as queue_exact
    from picked
),

range_counts as materialized (
    -- the range sums' input, computed once (inlined into the aggregate, each count is computed again
    -- for every sum that reads it: twice as slow)
    select * from window_counts where $over_range
),

counted as (
    select * from window_counts where $per_window
    union all by name
    -- over the range: the windows' counts add up; exact when every window with observations is
    select
        null::timestamp as window_start,
        null::bigint as slot,
        path,
        any_value(target) as target,
        any_value(path_code) as path_code,
        any_value(ttft_s) as ttft_s,
        any_value(tpot_s) as tpot_s,
        any_value(e2e_s) as e2e_s,
        any_value(queue_s) as queue_s,
        sum(ttft_count) as ttft_count,
        sum(e2e_count) as e2e_count,
        sum(tpot_count) as tpot_count,
        sum(finished) as finished,
        sum(failed) as failed,
        sum(ttft_n) as ttft_n,
        sum(ttft_bad) as ttft_bad,
        sum(ttft_bad_low) as ttft_bad_low,
        sum(ttft_bad_high) as ttft_bad_high,
        coalesce(bool_and(ttft_exact) filter (where ttft_n is not null), bool_and(ttft_exact)) as ttft_exact,
        sum(tpot_n) as tpot_n,
        sum(tpot_bad) as tpot_bad,
        sum(tpot_bad_low) as tpot_bad_low,
        sum(tpot_bad_high) as tpot_bad_high,
        coalesce(bool_and(tpot_exact) filter (where tpot_n is not null), bool_and(tpot_exact)) as tpot_exact,
        sum(itl_n) as itl_n,
        sum(itl_bad) as itl_bad,
        sum(itl_bad_low) as itl_bad_low,
        sum(itl_bad_high) as itl_bad_high,
        coalesce(bool_and(itl_exact) filter (where itl_n is not null), bool_and(itl_exact)) as itl_exact,
        sum(itl_above_high) as itl_above_high,
        sum(e2e_n) as e2e_n,
        sum(e2e_bad) as e2e_bad,
        sum(e2e_bad_low) as e2e_bad_low,
        sum(e2e_bad_high) as e2e_bad_high,
        coalesce(bool_and(e2e_exact) filter (where e2e_n is not null), bool_and(e2e_exact)) as e2e_exact,
        sum(queue_n) as queue_n,
        sum(queue_bad) as queue_bad,
        sum(queue_bad_low) as queue_bad_low,
        sum(queue_bad_high) as queue_bad_high,
        coalesce(bool_and(queue_exact) filter (where queue_n is not null), bool_and(queue_exact)) as queue_exact
    from range_counts
    group by path
),

pivoted as (
    select
        c.window_start,
        c.slot,
        c.path,
        c.path_code,
        coalesce(c.ttft_count, c.e2e_count, c.tpot_count, c.finished) as requests,
        coalesce(c.failed, 0) as failed_requests,
        coalesce(c.finished, c.e2e_count, c.tpot_count, c.ttft_count) as finished_requests,
        c.target,
        c.ttft_s,
        c.tpot_s,
        c.e2e_s,
        c.queue_s,
        c.ttft_bad / c.ttft_n as ttft_share,
        c.ttft_bad_low / c.ttft_n as ttft_low,
        c.ttft_bad_high / c.ttft_n as ttft_high,
        c.ttft_exact,
        c.tpot_bad / c.tpot_n as tpot_share,
        c.tpot_bad_low / c.tpot_n as tpot_low,
        c.tpot_bad_high / c.tpot_n as tpot_high,
        c.tpot_exact,
        c.itl_bad / c.itl_n as itl_share,
        c.itl_bad_low / c.itl_n as itl_low,
        c.itl_bad_high / c.itl_n as itl_high,
        c.itl_exact,
        c.itl_above_high,
        c.e2e_bad / c.e2e_n as e2e_share,
        c.e2e_bad_low / c.e2e_n as e2e_low,
        c.e2e_bad_high / c.e2e_n as e2e_high,
        c.e2e_exact,
        c.queue_bad / c.queue_n as queue_share,
        c.queue_bad_low / c.queue_n as queue_low,
        c.queue_bad_high / c.queue_n as queue_high,
        c.queue_exact
    from counted as c
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

shared as (
    select
        window_start,
        slot,
        path,
        path_code,
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
)

,

streamed as (
    -- per window, the burn-rate alerts over the stored windows as they come (path, time): a window
    -- without requests adds 0, as the dense grid's idle window does in promise__burn_alerts, whose
    -- running totals and lags follow. `fits`: this window keeps the stream that grid (the header)
    select
        *,
        case when requests > 0 then joint_low * requests end as bad_low,
        case when requests > 0 then joint_high * requests end as bad_high,
        case when requests > 0 then requests else 0 end as n,
        case when requests > 0 then joint_low * requests else 0 end as lo,
        case when requests > 0 then joint_high * requests else 0 end as hi,
        path_code is distinct from lag(path_code) over () as path_start,
        case
            when lag(path_code) over () is null then coalesce(requests > 0, false)
            when lag(path_code) over () < path_code
                then coalesce(requests > 0, false) and coalesce(lag(requests) over () > 0, false)
            when lag(path_code) over () = path_code then coalesce(slot = lag(slot) over () + 1, false)
            else false
        end as fits
    from shared
),

running as (
    -- running totals in stream order (an empty OVER keeps it); non-decreasing, as every term is >= 0
    select
        *,
        sum(n) over w as n_cum,
        sum(lo) over w as lo_cum,
        sum(hi) over w as hi_cum,
        count(*) filter (where not fits) over w as misfits
    from streamed
    window w as (rows between unbounded preceding and current row)
),

lagged as (
    select
        *,
        lag(n_cum, greatest(1, 300 // $window_s)) over () as n_before_5m,
        lag(lo_cum, greatest(1, 300 // $window_s)) over () as lo_before_5m,
        lag(hi_cum, greatest(1, 300 // $window_s)) over () as hi_before_5m,
        lag(n_cum, greatest(1, 1800 // $window_s)) over () as n_before_30m,
        lag(lo_cum, greatest(1, 1800 // $window_s)) over () as lo_before_30m,
        lag(hi_cum, greatest(1, 1800 // $window_s)) over () as hi_before_30m,
        lag(n_cum, greatest(1, 3600 // $window_s)) over () as n_before_1h,
        lag(lo_cum, greatest(1, 3600 // $window_s)) over () as lo_before_1h,
        lag(hi_cum, greatest(1, 3600 // $window_s)) over () as hi_before_1h,
        lag(n_cum, greatest(1, 21600 // $window_s)) over () as n_before_6h,
        lag(lo_cum, greatest(1, 21600 // $window_s)) over () as lo_before_6h,
        lag(hi_cum, greatest(1, 21600 // $window_s)) over () as hi_before_6h,
        lag(n_cum, greatest(1, 259200 // $window_s)) over () as n_before_3d,
        lag(lo_cum, greatest(1, 259200 // $window_s)) over () as lo_before_3d,
        lag(hi_cum, greatest(1, 259200 // $window_s)) over () as hi_before_3d,
        -- the totals just before the path's first window, where a range reaching further back
        -- than the path's span starts (the latest path start so far: the totals only grow)
        max(case when path_start then n_cum - n end) over w as n_0,
        max(case when path_start then lo_cum - lo end) over w as lo_0,
        max(case when path_start then hi_cum - hi end) over w as hi_0
    from running
    window w as (rows between unbounded preceding and current row)
),

-- trailing sums over the windows wholly inside (end - L, end], end the end of the current window
-- (at least the current window): the SRE workbook's rule ranges on the cube's grid
trailing_sums as (
    select
        *,
        n_cum - greatest(coalesce(n_before_5m, 0), n_0) as n_5m,
        lo_cum - greatest(coalesce(lo_before_5m, 0), lo_0) as lo_5m,
        hi_cum - greatest(coalesce(hi_before_5m, 0), hi_0) as hi_5m,
        n_cum - greatest(coalesce(n_before_30m, 0), n_0) as n_30m,
        lo_cum - greatest(coalesce(lo_before_30m, 0), lo_0) as lo_30m,
        hi_cum - greatest(coalesce(hi_before_30m, 0), hi_0) as hi_30m,
        n_cum - greatest(coalesce(n_before_1h, 0), n_0) as n_1h,
        lo_cum - greatest(coalesce(lo_before_1h, 0), lo_0) as lo_1h,
        hi_cum - greatest(coalesce(hi_before_1h, 0), hi_0) as hi_1h,
        n_cum - greatest(coalesce(n_before_6h, 0), n_0) as n_6h,
        lo_cum - greatest(coalesce(lo_before_6h, 0), lo_0) as lo_6h,
        hi_cum - greatest(coalesce(hi_before_6h, 0), hi_0) as hi_6h,
        n_cum - greatest(coalesce(n_before_3d, 0), n_0) as n_3d,
        lo_cum - greatest(coalesce(lo_before_3d, 0), lo_0) as lo_3d,
        hi_cum - greatest(coalesce(hi_before_3d, 0), hi_0) as hi_3d
    from lagged
    where requests > 0
),

rated as (
    select
        *,
        lo_5m / n_5m / (1 - target) as b_lo_5m, hi_5m / n_5m / (1 - target) as b_hi_5m,
        lo_30m / n_30m / (1 - target) as b_lo_30m, hi_30m / n_30m / (1 - target) as b_hi_30m,
        lo_1h / n_1h / (1 - target) as b_lo_1h, hi_1h / n_1h / (1 - target) as b_hi_1h,
        lo_6h / n_6h / (1 - target) as b_lo_6h, hi_6h / n_6h / (1 - target) as b_hi_6h,
        lo_3d / n_3d / (1 - target) as b_lo_3d, hi_3d / n_3d / (1 - target) as b_hi_3d
    from trailing_sums
)

select
    window_start,
    path,
    requests,
    failed_requests,
    finished_requests,
    target,
    ttft_threshold_s,
    ttft_share,
    ttft_low,
    ttft_high,
    ttft_exact,
    tpot_threshold_s,
    tpot_share,
    tpot_low,
    tpot_high,
    tpot_exact,
    tpot_basis,
    e2e_threshold_s,
    e2e_share,
    e2e_low,
    e2e_high,
    e2e_exact,
    queue_threshold_s,
    queue_share,
    queue_low,
    queue_high,
    queue_exact,
    failed_share,
    joint_low,
    joint_high,
    -- the burn-rate columns are per window: NULL on the range rows
    case when window_start is not null then bad_low / requests / (1 - target) end as burn_low,
    case when window_start is not null then bad_high / requests / (1 - target) end as burn_high,
    case
        when window_start is null or $window_s > 300 then null
        when b_lo_1h > $fast_factor and b_lo_5m > $fast_factor then 'firing'
        when b_hi_1h > $fast_factor and b_hi_5m > $fast_factor then 'possible'
        else 'ok'
    end as page_1h,
    case
        when window_start is null or $window_s > 1800 then null
        when b_lo_6h > $slow_factor and b_lo_30m > $slow_factor then 'firing'
        when b_hi_6h > $slow_factor and b_hi_30m > $slow_factor then 'possible'
        else 'ok'
    end as page_6h,
    case
        when window_start is null or $window_s > 21600 then null
        when b_lo_3d > $ticket_factor and b_lo_6h > $ticket_factor then 'firing'
        when b_hi_3d > $ticket_factor and b_hi_6h > $ticket_factor then 'possible'
        else 'ok'
    end as ticket_3d,
    case when window_start is not null then misfits end as misfits
-- no ORDER BY: the windows come in stream order (selects and empty-OVER windows keep it)
from rated
