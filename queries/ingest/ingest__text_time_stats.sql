-- name: ingest__text_time_stats
-- purpose: how many staged samples carry a timestamp, and the range of those timestamps (in the
--   file's unit), to choose the time source and check the unit (by the median, so that one stray
--   sample cannot decide it)
-- grain: one row
-- reads: text_split
-- @returns n_timed BIGINT, n_untimed BIGINT, ts_min DOUBLE, ts_max DOUBLE, first_untimed_line BIGINT,
--   ts_median DOUBLE
with
final as (
    select
        count(ts_raw) as n_timed,
        count(*) - count(ts_raw) as n_untimed,
        min(ts_raw) as ts_min,
        max(ts_raw) as ts_max,
        min(line_no) filter (where ts_raw is null) as first_untimed_line,
        approx_quantile(ts_raw, 0.5) as ts_median
    from text_split
)

select * from final
