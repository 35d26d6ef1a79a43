-- name: ingest__aiperf_keys
-- purpose: the distinct series of the AIPerf samples (stage_keys contract): the entry's labels
--   plus `instance` from the scrape target (the entry's own `instance` wins) and `le` for buckets
-- grain: one row per distinct series key
-- reads: aiperf_samples
-- @returns series_key VARCHAR, metric VARCHAR, labels MAP(VARCHAR, VARCHAR)
with
distinct_keys as (
    select
        series_key,
        any_value(metric) as metric,
        any_value(instance) as instance,
        any_value(labels) as labels,
        any_value(le) as le
    from aiperf_samples
    group by series_key
),

final as (
    select
        series_key,
        metric,
        map_concat(
            map_from_entries(list_filter([{'key': 'instance', 'value': instance}], lambda i: i.value is not null)),
            labels,
            map_from_entries(list_filter([{'key': 'le', 'value': le}], lambda i: i.value is not null))
        ) as labels
    from distinct_keys
)

select * from final
