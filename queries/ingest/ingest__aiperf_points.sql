-- name: ingest__aiperf_points
-- purpose: the AIPerf samples in the stage_points contract shape; src_line is the JSON line
-- grain: one row per sample
-- reads: aiperf_samples
-- @returns series_key VARCHAR, ts TIMESTAMP, value DOUBLE, src_line BIGINT
with
final as (
    select series_key, ts, value, line_no as src_line from aiperf_samples
)

select * from final
