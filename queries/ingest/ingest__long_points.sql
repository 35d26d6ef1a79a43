-- name: ingest__long_points
-- purpose: the samples of a long-format CSV/Parquet file (stage_points contract): each parsed row
--   (`long_parsed`: its time and value; NULL where they do not parse, which
--   `ingest__long_problems` reports before the file loads) with the series key of its (metric,
--   labels JSON, label-column values) from `long_keys`. The reader makes this query the view
--   `stage_points`, so the file's samples are not copied before the load's insert: at a month's
--   185 M rows that copy was 7 GB, spilled to disk and read back.
-- grain: one row per row of the file
-- reads: long_parsed, long_keys
-- @returns series_key VARCHAR, ts TIMESTAMP, value DOUBLE, src_line BIGINT
with
final as (
    select k.series_key, r.ts, r.value, r.src_line
    from long_parsed as r
    inner join long_keys as k
        on k.raw_metric is not distinct from r.metric
        and k.labels_json is not distinct from r.labels_json
        and k.label_values is not distinct from r.label_values
)

select * from final
