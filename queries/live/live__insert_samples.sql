-- name: live__insert_samples
-- purpose: keep the raw samples a live pull read beside its windows (the series the capacity model's
--   per-scrape fit needs: every serving series but histogram buckets) as samples of the dataset
-- grain: DML; one row inserted per sample
-- reads: live_raw, stage_series
-- @param dataset_id INTEGER  the new dataset
insert into samples
select $dataset_id, ss.series_id, r.ts, r.value
from live_raw as r
inner join stage_series as ss on ss.series_key = r.metric || r.labels
