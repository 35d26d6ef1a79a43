-- name: cube__series_windows_sparse
-- purpose: cube__series_windows when every window of a series holds one sample (cube__sparse_windows
--   says so; cube__run_links found the runs disjoint, so the samples and their neighbours come from
--   cube__sample_runs, which kept every sample): the same rows, computed sample by sample, with no
--   per-window aggregate (at a month of 60 s scrapes read in 60 s windows, tens of millions of
--   groups). A window's increase is its sample's delta: the value minus the previous sample's, or
--   the value itself when its label set reset at that scrape (a bucket or `_count` decrease, a
--   `_created` change: docs/methods.md#joint-resets), 0 for a series' first sample (a baseline) plus the value
--   when the series began in the data (its `_created`, or a replica scraped once), exactly as
--   cube__series_windows' rules give for a window of one sample; a gauge's min, sum and max are the
--   value, its count 1. Its own query, not a branch of cube__series_windows: there the shared plan
--   (materialized CTEs read two or three times) took several times as long on a month's demand
--   samples, so the first-sample rules (`created`, `first_counted`) are written again here.
-- grain: one row per (series_id, window_start)
-- reads: cube_run_links, cube_sample_runs, cube_series, samples
-- @param dataset_ids INTEGER[]  datasets to include
-- @param window_s INTEGER  window length in seconds (60 to 86400)
-- @param replicas VARCHAR[]  only the series of these replicas (NULL: every series), as in
--   cube__series_windows
-- @returns series_id UBIGINT, window_start TIMESTAMP, increase DOUBLE, resets BIGINT,
--   gauge_min DOUBLE, gauge_sum DOUBLE, gauge_n BIGINT, gauge_max DOUBLE, first_counted BOOLEAN,
--   duplicates BIGINT
with
series_codes as (
    select distinct series_id, group_id, replica
    from cube_series
    where $replicas is null or list_contains($replicas, coalesce(replica, ''))
),

points as (
    select
        r.series_id,
        r.t_us,
        r.value,
        r.rule,
        case when r.run_start then l.prev_value else r.prev_value end as prev_value,
        c.group_id,
        c.replica,
        window_index(r.t_us, $window_s) as w
    from cube_sample_runs as r
    left join cube_run_links as l on r.series_id = l.series_id and r.t_us = l.t_us
    inner join series_codes as c on c.series_id = r.series_id
),

group_resets as (
    -- every (label set, scrape) where a member reset: all its members take their new values
    select distinct group_id, t_us
    from points
    where prev_value is not null and ((rule = 1 and value < prev_value) or (rule = 2 and value != prev_value))
),

replica_scrapes as (
    select replica, min(t_us) as first_us, min(t_us) = max(t_us) as single_scrape
    from points
    group by replica
),

firsts as (
    -- the first sample of each counter series: a baseline unless the series began in the data
    select series_id, t_us as first_us, value as first_value, group_id, replica
    from points
    where prev_value is null and rule in (1, 3)
),

created as (
    select c.group_id, epoch_us(p.ts) as t_us, max(p.value) as created_at
    from samples as p
    inner join cube_series as c using (series_id)
    where
        c.kind in ('histogram', 'counter')
        and c.suffix = 'created'
        and list_contains($dataset_ids, p.dataset_id)
        and (c.group_id, epoch_us(p.ts)) in (select (group_id, first_us) from firsts)
    group by all
),

first_counted as (
    select
        f.series_id,
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
        p.series_id,
        make_timestamp(window_start_us(p.w, $window_s)) as window_start,
        case when p.rule in (1, 3) then
            case
                when p.prev_value is null then p.value - p.value
                when g.group_id is not null then p.value
                else p.value - p.prev_value
            end
            + case when p.prev_value is null and fc.counted then fc.first_value else 0 end
        end as increase,
        case when p.rule in (1, 3) and p.prev_value is not null and g.group_id is not null then 1 else 0 end::bigint
            as resets,
        case when p.rule = 4 then p.value end as gauge_min,
        case when p.rule = 4 then p.value end as gauge_sum,
        case when p.rule = 4 then 1::bigint end as gauge_n,
        case when p.rule = 4 then p.value end as gauge_max,
        coalesce(p.rule in (1, 3) and p.prev_value is null and fc.counted, false) as first_counted,
        0::bigint as duplicates
    from points as p
    left join group_resets as g on g.group_id = p.group_id and g.t_us = p.t_us
    left join first_counted as fc on fc.series_id = p.series_id and p.prev_value is null
    where p.rule in (1, 3, 4)
)

select * from final
