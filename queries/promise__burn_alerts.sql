-- name: promise__burn_alerts
-- purpose: per window and path the burn rate of the joint promise's error budget, and the states of
--   the multiwindow multi-burn-rate alerts of the SRE workbook (methods.md 5.2): page when both the
--   1 h and 5 min burn exceed the fast factor (14.4 for a 30-day SLO: 2 % of the budget in 1 h),
--   page when 6 h and 30 min exceed the slow factor (6: 5 % in 6 h), ticket when 3 d and 6 h exceed
--   the ticket factor (1: 10 % in 3 d).
--   Ratios over a trailing range are request-weighted (sum of breaches / sum of requests), not a
--   mean of window ratios. With an interval of breach shares, a rule is `firing` when even the low
--   ends exceed the factor, `possible` when only the high ends do, else `ok`; NULL when the cube
--   window is longer than the rule's short window.
-- grain: one row per (window_start, path); reads the per-window promise table `promise_windows`
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
        joint_high * requests as bad_high
    from promise_windows
),

-- trailing sums over (end - L, end]; the frame covers windows whose start is within L - window
trailing_sums as (
    select
        *,
        sum(requests) over w5m as n_5m, sum(bad_low) over w5m as lo_5m, sum(bad_high) over w5m as hi_5m,
        sum(requests) over w30m as n_30m, sum(bad_low) over w30m as lo_30m, sum(bad_high) over w30m as hi_30m,
        sum(requests) over w1h as n_1h, sum(bad_low) over w1h as lo_1h, sum(bad_high) over w1h as hi_1h,
        sum(requests) over w6h as n_6h, sum(bad_low) over w6h as lo_6h, sum(bad_high) over w6h as hi_6h,
        sum(requests) over w3d as n_3d, sum(bad_low) over w3d as lo_3d, sum(bad_high) over w3d as hi_3d
    from windows
    window
        w5m as (partition by path order by window_start
            range between to_seconds(greatest(300 - $window_s, 0)) preceding and current row),
        w30m as (partition by path order by window_start
            range between to_seconds(greatest(1800 - $window_s, 0)) preceding and current row),
        w1h as (partition by path order by window_start
            range between to_seconds(greatest(3600 - $window_s, 0)) preceding and current row),
        w6h as (partition by path order by window_start
            range between to_seconds(greatest(21600 - $window_s, 0)) preceding and current row),
        w3d as (partition by path order by window_start
            range between to_seconds(greatest(259200 - $window_s, 0)) preceding and current row)
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

select * from final order by path, window_start
