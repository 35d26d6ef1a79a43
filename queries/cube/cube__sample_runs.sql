-- name: cube__sample_runs
-- purpose: the samples a window of cube__series_windows needs, found without sorting: the
--   selected samples are read in storage order (a load stores a file as it reads it, and exports
--   come series by series in time order), each beside the rows before and after it in that order
--   (a streaming lag/lead, no sort; in four ranges of row ids, side by side). A run is a maximal
--   stretch of one series with rising times inside one range; inside a run those neighbours are
--   the series' previous and next samples whenever the runs of each series do not overlap in time (cube__run_links checks it; cube__series_windows patches the
--   neighbours at run ends from there). Kept, as cube__series_windows keeps them: a window's first
--   and last samples, resets, gauge and non-finite samples, and every run's first and last sample.
-- grain: one row per kept sample (series_id, t_us)
-- reads: cube_series, samples
-- @param dataset_ids INTEGER[]  datasets to include
-- @param window_s INTEGER  window length in seconds (60 to 86400)
-- @param row_cuts BIGINT[]  five row ids: the four ranges [cut k, cut k+1) to read (cube__sample_row_range)
-- @returns series_id UBIGINT, t_us BIGINT, value DOUBLE, rule UTINYINT, run_start BOOLEAN, run_end BOOLEAN,
--   prev_value DOUBLE, prev_us BIGINT, next_us BIGINT
with
series_codes as (
    -- the sample rules of cube__series_windows (1 counter, 2 `_created`, 3 `_sum`, 4 gauge)
    select
        series_id,
        any_value(
            case
                when kind in ('histogram', 'counter') and suffix in ('bucket', 'count', 'total', '') then 1
                when kind in ('histogram', 'counter') and suffix = 'created' then 2
                when kind in ('histogram', 'counter') then 3
                when kind in ('gauge', 'info') then 4
                else 0
            end
        )::utinyint as rule
    from cube_series
    group by series_id
),

stored as not materialized (
    select series_id, epoch_us(ts) as t_us, value, rowid as row_id
    from samples
    where list_contains($dataset_ids, dataset_id)
),

scanned as (
    -- the samples in storage order, each beside the rows before and after it in that order (an empty
    -- OVER: a streaming lag/lead, no sort), in four ranges of row ids ($row_cuts) read side by side:
    -- the streaming window of one range runs on one thread, so four ranges keep both cores busy.
    -- A range's ends only end runs, which
    -- cube__run_links links. Every series' samples, even for a cube of some signals (`final` keeps
    -- cube_series' own): a join or semi-join on the series before an empty OVER made the pass about
    -- twice as slow
    select
        series_id, t_us, value,
        lag(series_id) over () as scan_prev_series,
        lag(t_us) over () as scan_prev_us,
        lag(value) over () as scan_prev_value,
        lead(series_id) over () as scan_next_series,
        lead(t_us) over () as scan_next_us
    from stored
    where row_id >= $row_cuts[1] and row_id < $row_cuts[2]
    union all
    select
        series_id, t_us, value,
        lag(series_id) over () as scan_prev_series,
        lag(t_us) over () as scan_prev_us,
        lag(value) over () as scan_prev_value,
        lead(series_id) over () as scan_next_series,
        lead(t_us) over () as scan_next_us
    from stored
    where row_id >= $row_cuts[2] and row_id < $row_cuts[3]
    union all
    select
        series_id, t_us, value,
        lag(series_id) over () as scan_prev_series,
        lag(t_us) over () as scan_prev_us,
        lag(value) over () as scan_prev_value,
        lead(series_id) over () as scan_next_series,
        lead(t_us) over () as scan_next_us
    from stored
    where row_id >= $row_cuts[3] and row_id < $row_cuts[4]
    union all
    select
        series_id, t_us, value,
        lag(series_id) over () as scan_prev_series,
        lag(t_us) over () as scan_prev_us,
        lag(value) over () as scan_prev_value,
        lead(series_id) over () as scan_next_series,
        lead(t_us) over () as scan_next_us
    from stored
    where row_id >= $row_cuts[4] and row_id < $row_cuts[5]
),

bounded as (
    select
        series_id,
        t_us,
        value,
        scan_prev_series is distinct from series_id or scan_prev_us >= t_us as run_start,
        scan_next_series is distinct from series_id or scan_next_us <= t_us as run_end,
        scan_prev_value,
        scan_prev_us,
        scan_next_us,
        -- the start of the sample's window (lo_us, lo_us + width], in µs (as cube__series_windows)
        window_lo_us(t_us, $window_s) as lo_us
    from scanned
),

final as (
    select
        b.series_id,
        b.t_us,
        b.value,
        c.rule,
        b.run_start,
        b.run_end,
        case when not b.run_start then b.scan_prev_value end as prev_value,
        case when not b.run_start then b.scan_prev_us end as prev_us,
        case when not b.run_end then b.scan_next_us end as next_us
    from bounded as b
    inner join series_codes as c using (series_id)
    where b.run_start
        or b.run_end
        or b.scan_prev_us <= b.lo_us
        or b.scan_next_us > b.lo_us + window_us($window_s)
        or (c.rule = 1 and b.value < b.scan_prev_value)
        or (c.rule = 2 and b.value != b.scan_prev_value)
        or c.rule = 4
        or not isfinite(b.value)
)

select * from final
