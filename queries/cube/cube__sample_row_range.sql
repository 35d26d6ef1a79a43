-- name: cube__sample_row_range
-- purpose: the row ids the samples of some datasets are stored between, for the ranges
--   cube__sample_runs reads in parallel (a load stores a file's samples together)
-- grain: one row
-- reads: samples
-- @param dataset_ids INTEGER[]  datasets to include
-- @returns lo_row BIGINT, hi_row BIGINT
select
    coalesce(min(rowid), 0) as lo_row,
    coalesce(max(rowid) + 1, 0) as hi_row
from samples
where list_contains($dataset_ids, dataset_id)
