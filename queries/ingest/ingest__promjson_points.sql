-- name: ingest__promjson_points
-- purpose: the float samples of the Prometheus API series (stage_points contract): timestamps are
--   float Unix seconds (rounded to the microsecond; another unit when the reader finds one), values
--   strings ("NaN", "+Inf" allowed); a time past the year 9999 is NULL (the checks drop it, saying
--   so); src_line is the series' ordinal in the file
-- grain: one row per sample
-- reads: promjson_series
-- @param ts_unit_us DOUBLE  microseconds per unit of the timestamps (1e6: seconds)
-- @returns series_key VARCHAR, ts TIMESTAMP, value DOUBLE, src_line BIGINT
with
pairs as (
    select series_no, series_key, unnest(pairs) as pair
    from promjson_series
),

final as (
    select
        series_key,
        ts_from_unit(cast(pair[1] as double), $ts_unit_us) as ts,
        cast(pair[2] as double) as value,
        series_no as src_line
    from pairs
)

select * from final
