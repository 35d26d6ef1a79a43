-- name: ingest__check_drop_buckets
-- purpose: remove the bucket samples of histograms that have neither a `+Inf` bucket nor a `_count`
--   (no total to take a share of)
-- grain: DML; deletes one row per bucket sample of such a label set
-- reads: check_missing_inf, stage_points
delete from stage_points
where series_key in (
    select unnest(bucket_keys) from check_missing_inf where count_key is null
)
