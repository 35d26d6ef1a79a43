-- name: ingest__check_add_inf_keys
-- purpose: the repaired `+Inf` bucket series of histograms that lack one (their `_count` stands in):
--   new staged series keys
-- grain: DML; inserts one row per repaired histogram label set
-- reads: check_missing_inf
insert into stage_keys (series_key, metric, labels)
select inf_key as series_key, inf_metric as metric, inf_labels as labels
from check_missing_inf
where count_key is not null
