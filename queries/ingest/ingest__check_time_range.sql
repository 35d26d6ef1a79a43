-- name: ingest__check_time_range
-- purpose: staged samples dated implausibly: after `$future` (a day after the load: a clock set
--   wrong, or a unit mix-up) or before 2000-01-01 (no LLM server exported metrics then: seconds since
--   a process start, or seconds read as milliseconds); the first line and the extreme time of each
-- grain: one row
-- reads: stage_points
-- @param future TIMESTAMP  samples after this are in the future
-- @returns n_future BIGINT, first_future_line BIGINT, latest TIMESTAMP, n_past BIGINT,
--   first_past_line BIGINT, earliest TIMESTAMP
with
final as (
    select
        count(*) filter (where ts > $future) as n_future,
        min(src_line) filter (where ts > $future) as first_future_line,
        max(ts) as latest,
        count(*) filter (where ts < timestamp '2000-01-01') as n_past,
        min(src_line) filter (where ts < timestamp '2000-01-01') as first_past_line,
        min(ts) as earliest
    from stage_points
)

select * from final
