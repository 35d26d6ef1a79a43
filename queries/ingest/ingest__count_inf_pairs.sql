-- name: ingest__count_inf_pairs
-- purpose: the staged histograms whose `_count` and `+Inf` bucket can be compared: one series of each
--   per label set, with their keys, stored ids and the `_count` series as a person reads it
-- grain: one row per histogram label set (group_id) with one `_count` and one `+Inf` bucket series
-- reads: stage_series
-- @returns group_id UBIGINT, count_key VARCHAR, count_id UBIGINT, inf_key VARCHAR, inf_id UBIGINT,
--   series VARCHAR
with
final as (
    select
        c.group_id,
        any_value(c.series_key) filter (where c.suffix = 'count') as count_key,
        any_value(c.series_id) filter (where c.suffix = 'count') as count_id,
        any_value(c.series_key) filter (where c.suffix = 'bucket') as inf_key,
        any_value(c.series_id) filter (where c.suffix = 'bucket') as inf_id,
        any_value(series_text(c.family, c.labels)) filter (where c.suffix = 'count') as series
    from stage_series as c
    where c.mtype in ('histogram', 'gaugehistogram')
        and (c.suffix = 'count' or (c.suffix = 'bucket' and c.le = 'Infinity'::double))
    group by c.group_id
    having count(*) filter (where c.suffix = 'count') = 1
        and count(*) filter (where c.suffix = 'bucket') = 1
)

select * from final
