-- name: ingest__vm_points
-- purpose: the samples of the VictoriaMetrics export (stage_points contract): timestamps are
--   integer Unix milliseconds (another unit when the reader finds one; a time past the year 9999 is
--   NULL: the checks drop it, saying so); src_line is the line of the series
-- grain: one row per sample
-- reads: vm_series
-- @param ts_unit_us DOUBLE  microseconds per unit of the timestamps (1000: milliseconds)
-- @returns series_key VARCHAR, ts TIMESTAMP, value DOUBLE, src_line BIGINT
with
samples as (
    select line_no, series_key, unnest(vals) as value_text, unnest(stamps) as ts_text
    from vm_series
),

final as (
    select
        series_key,
        ts_from_unit(cast(ts_text as double), $ts_unit_us) as ts,
        cast(value_text as double) as value,
        line_no as src_line
    from samples
)

select * from final
