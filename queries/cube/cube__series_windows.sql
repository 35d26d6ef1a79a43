-- name: cube__series_windows
-- purpose: per series and window, the exact increase of a counter (sum of deltas between
--   consecutive scrapes, a delta attributed to the window holding its later sample; a reset takes
--   the new value) and min/sum/count/max of a gauge. A histogram's reset is detected jointly: a
--   decrease of any bucket or of `_count`, or a change of `_created`, at a scrape resets every
--   series of that label set (docs/methods.md#joint-resets). A series' first sample is a baseline, as in
--   PromQL, unless its `_created` time says it began after its replica's first scrape, or its
--   replica was scraped only once (a snapshot: the value is the increase since the server started).
--   Windows are left-open, right-closed: (window_start, window_start + window_s], like a PromQL
--   range ending at the window's end, so adjacent windows tile exactly.
--   How (each series in time order once, then small work): with $presorted the samples' neighbours
--   come from a streaming pass in storage order (cube__sample_runs, cube__run_links: no sort of
--   the samples); otherwise each series is sorted by time (lag/lead). Without a reset in a window the sum of its deltas telescopes to (last value) - (the value
--   before the window), so only a window's first and last samples, the resets and the gauge
--   samples go on to the per-window aggregate. The (series, window) pairs of a label set that
--   reset are rare: they are recomputed sample by sample with the joint rule. Windows are integer
--   µs arithmetic equal to time_bucket(width, ts - 1 µs) (origin 2000-01-03; macros/windows).
--   `duplicates` counts samples that share a series and time: the build (app/cube.py) runs the
--   query again with $dedupe, keeping one value per series and time (the highest), when any exist.
-- grain: one row per (series_id, window_start)
-- reads: cube_run_links, cube_sample_runs, cube_series, samples
-- @param dataset_ids INTEGER[]  datasets to include (overlapping exports: one value per series and ts)
-- @param window_s INTEGER  window length in seconds (60 to 86400)
-- @param dedupe BOOLEAN  first reduce the samples to one per (series, ts) (needed only when duplicates > 0)
-- @param presorted BOOLEAN  read the kept samples and their neighbours from `cube_sample_runs` and
--   `cube_run_links` (valid when every series' runs are disjoint) instead of sorting the samples
-- @param replicas VARCHAR[]  only the series of these replicas (NULL: every series). A label set's
--   series are of one replica, and a replica's first scrape is its own, so a replica's rows are the
--   same computed alone: app/cube.py runs a large build a few replicas at a time, each part's
--   aggregate within DuckDB's memory
-- @returns series_id UBIGINT, window_start TIMESTAMP, increase DOUBLE, resets BIGINT,
--   gauge_min DOUBLE, gauge_sum DOUBLE, gauge_n BIGINT, gauge_max DOUBLE, first_counted BOOLEAN,
--   duplicates BIGINT
with
series_meta as (
    select distinct series_id, kind, suffix, group_id, replica
    from cube_series
    where $replicas is null or list_contains($replicas, coalesce(replica, ''))
),

series_codes as (
    -- what a sample of the series means, as one small number carried through the sort:
    -- 1 counter total, bucket or count (a decrease is a reset), 2 `_created` (a change is a reset),
    -- 3 histogram `_sum` (takes part in its label set's resets), 4 gauge or info, 0 anything else
    select
        series_id,
        group_id,
        replica,
        case
            when kind in ('histogram', 'counter') and suffix in ('bucket', 'count', 'total', '') then 1
            when kind in ('histogram', 'counter') and suffix = 'created' then 2
            when kind in ('histogram', 'counter') then 3
            when kind in ('gauge', 'info') then 4
            else 0
        end::utinyint as rule
    from series_meta
),

points as (
    -- as stored, or one value per (series, ts) when $dedupe
    select series_id, epoch_us(ts) as t_us, value
    from samples
    where not $dedupe and not $presorted and list_contains($dataset_ids, dataset_id)
    union all
    select series_id, epoch_us(ts) as t_us, max(value) as value
    from samples
    where $dedupe and not $presorted and list_contains($dataset_ids, dataset_id)
    group by series_id, ts
),

sequenced as (
    -- the one sort: each series in time order (unless $presorted)
    select
        p.series_id,
        p.t_us,
        p.value,
        c.rule,
        lag(p.value) over by_time as prev_value,
        lag(p.t_us) over by_time as prev_us,
        lead(p.t_us) over by_time as next_us
    from points as p
    inner join series_codes as c using (series_id)
    where not $presorted
    window by_time as (partition by p.series_id order by p.t_us)
    union all
    -- $presorted: the samples found without a sort, their neighbours at run ends filled in
    select
        r.series_id,
        r.t_us,
        r.value,
        r.rule,
        case when r.run_start then l.prev_value else r.prev_value end as prev_value,
        case when r.run_start then l.prev_us else r.prev_us end as prev_us,
        case when r.run_end then l.next_us else r.next_us end as next_us
    from cube_sample_runs as r
    left join cube_run_links as l on r.series_id = l.series_id and r.t_us = l.t_us
    where $presorted and ($replicas is null or r.series_id in (select series_id from series_meta))
),

bounded as (
    -- lo_us: the start of the sample's window (lo_us, lo_us + width], in µs
    select
        *,
        prev_value is not null and (
            (rule = 1 and value < prev_value) or (rule = 2 and value != prev_value)
        ) as own_reset,
        window_lo_us(t_us, $window_s) as lo_us
    from sequenced
),

kept as (
    -- what a window needs: its first and last samples, resets, duplicates and every gauge sample
    select
        series_id,
        t_us,
        value,
        rule,
        prev_value,
        window_index(t_us, $window_s) as w,
        prev_us is null or prev_us <= lo_us as opens,
        next_us is null or next_us > lo_us + window_us($window_s) as closes,
        own_reset,
        prev_us = t_us as duplicate
    from bounded
    where prev_us is null
        or prev_us <= lo_us
        or next_us is null
        or next_us > lo_us + window_us($window_s)
        or own_reset
        or prev_us = t_us
        or rule = 4
        or not isfinite(value)
),

windowed as (
    select
        series_id,
        w,
        max(value) filter (where closes) as last_value,
        max(prev_value) filter (where opens) as baseline,
        max(value) filter (where opens and prev_value is null) as first_value,
        min(t_us) as min_us,
        max(t_us) as max_us,
        min(value) filter (where rule = 4) as gauge_min,
        sum(value) filter (where rule = 4) as gauge_sum,
        count(*) filter (where rule = 4) as gauge_n,
        max(value) filter (where rule = 4) as gauge_max,
        count(*) filter (where duplicate) as duplicates,
        count(*) filter (where not isfinite(value)) as nonfinite
    from kept
    group by series_id, w
),

with_codes as (
    select
        w.*,
        -- without a reset in the window the sum of (value - previous) telescopes to last - baseline
        -- (a series that starts here: last - its first value); windows with a reset are recomputed
        w.last_value - coalesce(w.baseline, w.first_value) as increase_after_first,
        c.rule,
        c.group_id,
        c.replica
    from windowed as w
    inner join series_codes as c using (series_id)
),

group_resets as (
    -- every (label set, scrape) where a member reset: all its members take their new values
    select distinct c.group_id, k.t_us
    from kept as k
    inner join series_codes as c using (series_id)
    where k.own_reset
),

affected as (
    -- the (series, window) pairs that hold a reset of their label set, or a NaN/Inf sample (the
    -- telescoped difference would hide what the sum of deltas makes of it)
    select distinct
        m.series_id,
        window_index(g.t_us, $window_s) as w
    from group_resets as g
    inner join series_codes as m using (group_id)
    where m.rule in (1, 3)
    union
    select w.series_id, w.w
    from windowed as w
    inner join series_codes as c using (series_id)
    where w.nonfinite > 0 and c.rule in (1, 3)
),

affected_points as (
    -- their samples, and the sample before the window placed at the window start (only order matters)
    select a.series_id, a.w, epoch_us(p.ts) as t_us, max(p.value) as value, false as is_baseline
    from samples as p
    inner join affected as a
        on
            a.series_id = p.series_id
            and a.w = window_index(epoch_us(p.ts), $window_s)
    where list_contains($dataset_ids, p.dataset_id)
    group by a.series_id, a.w, p.ts
    union all
    select a.series_id, a.w, window_start_us(a.w, $window_s) as t_us, b.baseline as value, true
    from affected as a
    inner join windowed as b using (series_id, w)
    where b.baseline is not null
),

recomputed as (
    select
        r.*,
        lag(r.value) over (partition by r.series_id, r.w order by r.t_us) as prev_value,
        c.group_id
    from affected_points as r
    inner join series_codes as c using (series_id)
),

recomputed_windows as (
    select
        r.series_id,
        r.w,
        sum(
            case
                when g.group_id is not null and r.prev_value is not null then r.value
                else r.value - r.prev_value
            end
        ) as increase_after_first,
        count(*) filter (where g.group_id is not null and r.prev_value is not null) as resets
    from recomputed as r
    left join group_resets as g on g.group_id = r.group_id and g.t_us = r.t_us
    where not r.is_baseline
    group by r.series_id, r.w
),

replica_scrapes as (
    select replica, min(min_us) as first_us, min(min_us) = max(max_us) as single_scrape
    from with_codes
    group by replica
),

firsts as (
    -- the first sample of each counter series: a baseline unless the series began in the data
    select series_id, w, min_us as first_us, first_value, group_id, replica
    from with_codes
    where first_value is not null and rule in (1, 3)
),

created as (
    select c.group_id, epoch_us(p.ts) as t_us, max(p.value) as created_at
    from samples as p
    inner join series_codes as c using (series_id)
    where
        c.rule = 2
        and list_contains($dataset_ids, p.dataset_id)
        and (c.group_id, epoch_us(p.ts)) in (select (group_id, first_us) from firsts)
    group by all
),

first_counted as (
    select
        f.series_id,
        f.w,
        r.single_scrape
        or (
            c.created_at is not null
            and to_timestamp(c.created_at)::timestamp > make_timestamp(r.first_us)
        ) as counted,
        f.first_value
    from firsts as f
    inner join replica_scrapes as r using (replica)
    left join created as c on c.group_id = f.group_id and c.t_us = f.first_us
),

final as (
    select
        w.series_id,
        make_timestamp(window_start_us(w.w, $window_s)) as window_start,
        case when w.rule in (1, 3) then
            coalesce(x.increase_after_first, w.increase_after_first, 0)
            + case when fc.counted then fc.first_value else 0 end
        end as increase,
        case when w.rule in (1, 3) then coalesce(x.resets, 0) else 0 end as resets,
        case when w.rule = 4 then w.gauge_min end as gauge_min,
        case when w.rule = 4 then w.gauge_sum end as gauge_sum,
        case when w.rule = 4 then w.gauge_n end as gauge_n,
        case when w.rule = 4 then w.gauge_max end as gauge_max,
        coalesce(w.rule in (1, 3) and fc.counted, false) as first_counted,
        w.duplicates
    from with_codes as w
    left join first_counted as fc using (series_id, w)
    left join recomputed_windows as x using (series_id, w)
    where w.rule in (1, 3, 4)
)

select * from final
