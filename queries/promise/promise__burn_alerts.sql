-- name: promise__burn_alerts
-- purpose: per window and path the burn rate of the joint promise's error budget, and the states of
--   the multiwindow multi-burn-rate alerts of the SRE workbook (docs/methods.md#multiwindow-alerts): page when both the
--   1 h and 5 min burn exceed the fast factor (14.4 for a 30-day SLO: 2 % of the budget in 1 h),
--   page when 6 h and 30 min exceed the slow factor (6: 5 % in 6 h), ticket when 3 d and 6 h exceed
--   the ticket factor (1: 10 % in 3 d).
--   Ratios over a trailing range are request-weighted (sum of breaches / sum of requests), not a
--   mean of window ratios. With an interval of breach shares, a rule is `firing` when even the low
--   ends exceed the factor, `possible` when only the high ends do, else `ok`; NULL when the cube
--   window is longer than the rule's short window.
-- grain: one row per (path, window_start), by path and time (the order of the dense grid, which the
--   windows with an empty OVER keep); reads the per-window promise table `promise_windows`
-- reads: promise_windows
-- @param window_s INTEGER  the cube's window length in seconds
-- @param fast_factor DOUBLE  burn factor of the 1 h / 5 min page
-- @param slow_factor DOUBLE  burn factor of the 6 h / 30 min page
-- @param ticket_factor DOUBLE  burn factor of the 3 d / 6 h ticket
-- @returns window_start TIMESTAMP, path VARCHAR, requests DOUBLE, target DOUBLE, burn_low DOUBLE,
--   burn_high DOUBLE, page_1h VARCHAR, page_6h VARCHAR, ticket_3d VARCHAR
with
windows as (
    select
        window_start,
        path,
        requests,
        target,
        joint_low * requests as bad_low,
        joint_high * requests as bad_high,
        (epoch(window_start) // $window_s)::bigint as slot
    from promise_windows
),

dense as (
    -- every window of each path's span, paths one after another, so that a trailing range is a
    -- fixed number of rows back
    select
        s.path,
        g.slot,
        s.first_slot,
        x.window_start,
        x.requests,
        x.target,
        x.bad_low,
        x.bad_high,
        coalesce(x.requests, 0) as n,
        coalesce(x.bad_low, 0) as lo,
        coalesce(x.bad_high, 0) as hi
    from (select path, min(slot) as first_slot, max(slot) as last_slot from windows group by path) as s
    cross join range(s.first_slot, s.last_slot + 1) as g(slot)
    left join windows as x on x.path = s.path and x.slot = g.slot
    order by s.path, g.slot
),

running as (
    -- running totals in that order (a window with an empty OVER keeps it and streams, where a
    -- partitioned one sorts again); non-decreasing, as every term is >= 0
    select
        *,
        sum(n) over w as n_cum,
        sum(lo) over w as lo_cum,
        sum(hi) over w as hi_cum
    from dense
    window w as (rows between unbounded preceding and current row)
),

lagged as (
    -- the totals a fixed number of rows back (at least one window: the current one)
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
        max(case when slot = first_slot then n_cum - n end) over w as n_0,
        max(case when slot = first_slot then lo_cum - lo end) over w as lo_0,
        max(case when slot = first_slot then hi_cum - hi end) over w as hi_0
    from running
    window w as (rows between unbounded preceding and current row)
),

-- trailing sums over the windows wholly inside (end - L, end], end the end of the current window
-- (at least the current window): the SRE workbook's rule ranges on the cube's grid
trailing_sums as (
    select
        l.window_start,
        l.path,
        l.requests,
        l.target,
        l.bad_low,
        l.bad_high,
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
    from lagged as l
    where l.window_start is not null
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
),

final as (
    select
        window_start,
        path,
        requests,
        target,
        bad_low / requests / (1 - target) as burn_low,
        bad_high / requests / (1 - target) as burn_high,
        case
            when $window_s > 300 then null
            when b_lo_1h > $fast_factor and b_lo_5m > $fast_factor then 'firing'
            when b_hi_1h > $fast_factor and b_hi_5m > $fast_factor then 'possible'
            else 'ok'
        end as page_1h,
        case
            when $window_s > 1800 then null
            when b_lo_6h > $slow_factor and b_lo_30m > $slow_factor then 'firing'
            when b_hi_6h > $slow_factor and b_hi_30m > $slow_factor then 'possible'
            else 'ok'
        end as page_6h,
        case
            when $window_s > 21600 then null
            when b_lo_3d > $ticket_factor and b_lo_6h > $ticket_factor then 'firing'
            when b_hi_3d > $ticket_factor and b_hi_6h > $ticket_factor then 'possible'
            else 'ok'
        end as ticket_3d
    from rated
)

-- no ORDER BY: the rows are in the grid's order (path, time); selects and empty-OVER windows keep it
select * from final
