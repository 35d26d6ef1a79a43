-- name: ingest__promjson_keys
-- purpose: the distinct series of the Prometheus API file (stage_keys contract)
-- grain: one row per distinct series key
-- reads: promjson_series
-- @returns series_key VARCHAR, metric VARCHAR, labels MAP(VARCHAR, VARCHAR)
with
final as (
    select series_key, any_value(metric) as metric, any_value(labels) as labels
    from promjson_series
    group by series_key
)

select * from final
