-- name: ingest__vm_time_stats
-- purpose: the typical sample time of a VictoriaMetrics export as written (the median, so that one
--   stray sample cannot decide), to tell milliseconds (the export's unit, ~1.7e12 today) from seconds
--   a script wrote instead (~1.7e9)
-- grain: one row
-- reads: vm_series
-- @returns ts_median DOUBLE, n BIGINT
with
times as (
    select try_cast(unnest(stamps) as double) as t
    from vm_series
),

final as (
    select approx_quantile(t, 0.5) as ts_median, count(t) as n
    from times
)

select * from final
