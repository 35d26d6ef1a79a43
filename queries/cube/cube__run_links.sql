-- name: cube__run_links
-- purpose: the neighbours cube__sample_runs could not see: per series, its runs' first and last
--   samples in time order; a run's first sample follows the previous run's last, a run's last
--   sample precedes the next run's first. `disjoint` is false where the runs of a series overlap
--   or touch in time (the boundaries do not alternate first, last, first, ... with rising times:
--   samples of several exports interleave, or repeat a time): cube__series_windows then sorts the
--   samples instead (app/cube.py).
-- grain: one row per run boundary (series_id, t_us); reads the temp table `cube_sample_runs`
-- reads: cube_sample_runs
-- @returns series_id UBIGINT, t_us BIGINT, prev_value DOUBLE, prev_us BIGINT, next_us BIGINT,
--   disjoint BOOLEAN
with
boundaries as (
    select series_id, t_us, value, run_start, run_end
    from cube_sample_runs
    where run_start or run_end
),

linked as (
    select
        *,
        lag(value) over by_time as before_value,
        lag(t_us) over by_time as before_us,
        lag(run_end) over by_time as before_is_end,
        lead(t_us) over by_time as after_us,
        lead(run_start) over by_time as after_is_start
    from boundaries
    window by_time as (partition by series_id order by t_us)
),

final as (
    select
        series_id,
        t_us,
        case when run_start then before_value end as prev_value,
        case when run_start then before_us end as prev_us,
        case when run_end then after_us end as next_us,
        -- a first sample follows a last one (or nothing), a last one precedes a first one (or nothing)
        (not run_start or before_us is null or (before_is_end and before_us < t_us))
        and (not run_end or after_us is null or (after_is_start and after_us > t_us)) as disjoint
    from linked
)

select * from final
