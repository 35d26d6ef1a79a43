-- name: ingest__check_bad_points
-- purpose: the staged samples no number may be computed from, whatever the format: a time outside
--   the years 1 to 9999 (NULL from the reader); a value that is NaN or infinite (except a summary's
--   quantile, where NaN means "no observation yet"); a negative value of a series that only counts
--   up (a counter's `_total`, a histogram's or summary's `_bucket`/`_count`): macro bad_point_reason.
--   A counter with such a value would turn into a false reset or an infinite increase; the load
--   stores none of them (ingest__insert_samples) and, when it stored fewer samples than it staged,
--   says which (app.ingest.checks.bad_point_notes).
-- grain: one row per bad sample
-- reads: stage_series, stage_points
-- @returns series_key VARCHAR, series VARCHAR, ts TIMESTAMP, value DOUBLE, src_line BIGINT, reason VARCHAR
with
candidates as (
    -- a filter over every sample (cheap); the join below sees only the few that fail it
    select series_key, ts, value, src_line
    from stage_points
    where ts is null or not isfinite(value) or value < 0
),

judged as (
    select
        c.*,
        series_text(s.metric, s.labels) as series,
        bad_point_reason(c.ts, c.value, s.mtype, s.suffix) as reason
    from candidates as c
    inner join stage_series as s using (series_key)
),

final as (
    select series_key, series, ts, value, src_line, reason
    from judged
    where reason is not null
)

select * from final
