-- name: ingest__check_count_vs_inf
-- purpose: the scrapes at which a histogram's `_count` differs from its `+Inf` bucket (the two hold
--   the same number by definition), first line first
-- grain: one row per (histogram label set, time) where they differ, the first `max_rows` only
-- reads: check_series, stage_points
-- @param max_rows BIGINT  how many to return
-- @returns series VARCHAR, ts TIMESTAMP, count_value DOUBLE, inf_value DOUBLE, src_line BIGINT, n_bad BIGINT
with
pairs as (
    select
        c.group_id,
        any_value(c.series_key) filter (where c.suffix = 'count') as count_key,
        any_value(c.series_key) filter (where c.suffix = 'bucket') as inf_key,
        any_value(series_text(c.family, c.labels)) filter (where c.suffix = 'count') as series
    from check_series as c
    where c.mtype in ('histogram', 'gaugehistogram')
        and (c.suffix = 'count' or (c.suffix = 'bucket' and c.le = 'Infinity'::double))
    group by c.group_id
    having count(*) filter (where c.suffix = 'count') = 1
        and count(*) filter (where c.suffix = 'bucket') = 1
),

counts as (
    select pr.series, p.ts, p.value, p.src_line, pr.group_id
    from stage_points as p
    inner join pairs as pr on p.series_key = pr.count_key
),

infs as (
    select pr.group_id, p.ts, p.value
    from stage_points as p
    inner join pairs as pr on p.series_key = pr.inf_key
),

final as (
    select
        c.series,
        c.ts,
        c.value as count_value,
        i.value as inf_value,
        c.src_line,
        count(*) over () as n_bad
    from counts as c
    inner join infs as i on c.group_id = i.group_id and c.ts = i.ts
    where c.value <> i.value
    order by c.src_line
    limit $max_rows
)

select * from final
