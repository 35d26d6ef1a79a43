-- name: live__stage_keys
-- purpose: the series of a live pull (app.live.pushdown) as a load stages a file's: one key per distinct
--   store metric and label set of the pulled windows (a summed series carries only the labels it was
--   summed by) and of the raw samples kept beside them, for `ingest__staged_series`
-- grain: one row per distinct (metric, labels)
-- reads: live_pulled, live_raw
-- @returns series_key VARCHAR, metric VARCHAR, labels MAP(VARCHAR, VARCHAR)
with
keys as (
    select distinct metric, labels from live_pulled
    union
    select distinct metric, labels from live_raw
)

select
    metric || labels as series_key,
    metric,
    cast(cast(labels as json) as map(varchar, varchar)) as labels
from keys
