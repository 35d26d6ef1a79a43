-- name: ingest__long_points
-- purpose: the samples of a long-format file (stage_points contract)
-- grain: one row per row of the file
-- @returns series_key VARCHAR, ts TIMESTAMP, value DOUBLE, src_line BIGINT
with
final as (
    select series_key, ts, value, src_line from long_rows
)

select * from final
