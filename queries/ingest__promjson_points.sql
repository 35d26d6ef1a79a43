-- name: ingest__promjson_points
-- purpose: the float samples of the Prometheus API series (stage_points contract): timestamps are
--   float Unix seconds (rounded to the microsecond), values strings ("NaN", "+Inf" allowed);
--   src_line is the series' ordinal in the file
-- grain: one row per sample
-- reads: promjson_series
-- @returns series_key VARCHAR, ts TIMESTAMP, value DOUBLE, src_line BIGINT
with
pairs as (
    select series_no, series_key, unnest(pairs) as pair
    from promjson_series
),

final as (
    select
        series_key,
        make_timestamp(cast(round(cast(pair[1] as double) * 1000000) as bigint)) as ts,
        cast(pair[2] as double) as value,
        series_no as src_line
    from pairs
)

select * from final
