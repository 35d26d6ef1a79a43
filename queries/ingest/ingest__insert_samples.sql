-- name: ingest__insert_samples
-- purpose: add the staged file's samples to the workspace under a new dataset id, but those no
--   number may be computed from (macro bad_point_reason; app.ingest.checks.bad_point_notes words
--   them when the stored samples are fewer than the staged)
-- grain: DML; one row inserted per staged sample that is not a bad point
-- reads: stage_points, stage_series
-- @param dataset_id INTEGER  the new dataset
insert into samples
select $dataset_id, s.series_id, p.ts, p.value
from stage_points as p
inner join stage_series as s using (series_key)
where bad_point_reason(p.ts, p.value, s.mtype, s.suffix) is null
