-- name: ingest__insert_samples
-- purpose: add the staged file's samples to the workspace under a new dataset id
-- grain: DML; one row inserted per staged sample
-- reads: stage_points, stage_series
-- @param dataset_id INTEGER  the new dataset
insert into samples
select $dataset_id, s.series_id, p.ts, p.value
from stage_points as p
inner join stage_series as s using (series_key)
