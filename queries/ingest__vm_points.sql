-- name: ingest__vm_points
-- purpose: the samples of the VictoriaMetrics export (stage_points contract): timestamps are
--   integer Unix milliseconds; src_line is the line of the series
-- grain: one row per sample
-- reads: vm_series
-- @returns series_key VARCHAR, ts TIMESTAMP, value DOUBLE, src_line BIGINT
with
samples as (
    select line_no, series_key, unnest(vals) as value_text, unnest(stamps) as ts_text
    from vm_series
),

final as (
    select
        series_key,
        make_timestamp(cast(ts_text as bigint) * 1000) as ts,
        cast(value_text as double) as value,
        line_no as src_line
    from samples
)

select * from final
