-- name: ingest__check_missing_inf_list
-- purpose: the histograms `ingest__check_missing_inf` found (materialized as check_missing_inf), by
--   name, and whether a `_count` stands in for the missing `+Inf` bucket
-- grain: one row per histogram label set missing its +Inf bucket
-- reads: check_missing_inf
-- @returns series VARCHAR, count_key VARCHAR
select series, count_key
from check_missing_inf
order by series
