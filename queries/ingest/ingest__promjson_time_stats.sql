-- name: ingest__promjson_time_stats
-- purpose: the typical sample time of the Prometheus API series as written (the median, so that one
--   stray sample cannot decide), to tell float seconds (the API's unit, ~1.7e9 today) from
--   milliseconds a script wrote instead (~1.7e12)
-- grain: one row
-- reads: promjson_series
-- @returns ts_median DOUBLE, n BIGINT
with
times as (
    select cast(unnest(pairs)[1] as double) as t
    from promjson_series
),

final as (
    select approx_quantile(t, 0.5) as ts_median, count(t) as n
    from times
)

select * from final
