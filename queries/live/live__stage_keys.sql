-- name: live__stage_keys
-- purpose: the series of a live pull (app.live.pushdown) as a load stages a file's: one key per distinct
--   store metric and label set the pull kept, in windows or raw samples (a summed series carries only the
--   labels it was summed by), numbered in `live_keys` as the answers arrived, for `ingest__staged_series`
-- grain: one row per distinct (metric, labels)
-- reads: live_keys
-- @returns series_key VARCHAR, metric VARCHAR, labels MAP(VARCHAR, VARCHAR)
select
    metric || labels as series_key,
    metric,
    cast(cast(labels as json) as map(varchar, varchar)) as labels
from live_keys
