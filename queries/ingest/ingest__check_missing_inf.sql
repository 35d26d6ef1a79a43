-- name: ingest__check_missing_inf
-- purpose: the histogram label sets of the staged file that have buckets but no `+Inf` bucket (a
--   truncated file, or a script that dropped it). A share needs the total, which the `+Inf` bucket
--   holds; the `_count` holds the same number by definition, so where there is one it stands in
--   (`inf_key` is the series key the repaired bucket gets); without one the buckets are dropped.
-- grain: one row per histogram label set (group) missing its +Inf bucket
-- reads: stage_series
-- @returns group_id UBIGINT, series VARCHAR, count_key VARCHAR, inf_key VARCHAR, inf_metric VARCHAR,
--   inf_labels MAP(VARCHAR, VARCHAR), bucket_keys VARCHAR[]
with
groups as (
    select
        group_id,
        any_value(family) as family,
        list(series_key) filter (where suffix = 'bucket') as bucket_keys,
        count(*) filter (where suffix = 'bucket' and le = 'Infinity'::double) as n_inf,
        any_value(series_key) filter (where suffix = 'count') as count_key,
        any_value(metric) filter (where suffix = 'count') as count_metric,
        any_value(labels) filter (where suffix = 'count') as count_labels,
        any_value(map_from_entries(list_filter(map_entries(labels), lambda e: e.key <> 'le')))
            filter (where suffix = 'bucket') as group_labels
    from stage_series
    where mtype in ('histogram', 'gaugehistogram') and suffix in ('bucket', 'count')
    group by group_id
),

final as (
    select
        group_id,
        series_text(family, coalesce(count_labels, group_labels)) as series,
        count_key,
        '(+Inf bucket from) ' || count_key as inf_key,
        regexp_replace(count_metric, '_count$', '_bucket') as inf_metric,
        map_concat(count_labels, map {'le': '+Inf'}) as inf_labels,
        bucket_keys
    from groups
    where n_inf = 0 and len(bucket_keys) > 0
)

select * from final
