-- name: ingest__check_count_vs_inf
-- purpose: the scrapes at which a histogram's `_count` differs from its `+Inf` bucket (the two hold
--   the same number by definition), first line first, among the histograms $group_ids (those
--   ingest__count_inf_differing finds)
-- grain: one row per (histogram label set, time) where they differ, the first `max_rows` only
-- reads: count_inf_pairs, stage_points
-- @param max_rows BIGINT  how many to return
-- @param group_ids UBIGINT[]  the histograms (label sets) to compare
-- @returns series VARCHAR, ts TIMESTAMP, count_value DOUBLE, inf_value DOUBLE, src_line BIGINT, n_bad BIGINT
with
pairs as (
    -- the histograms to compare (of ingest__count_inf_pairs)
    select * from count_inf_pairs where list_contains($group_ids, group_id)
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
