-- name: ingest__insert_skipped_samples
-- purpose: keep the staged samples whose value is NaN or infinite (macro bad_point_reason 'value')
--   beside the samples, under the new dataset id: valid values (OpenMetrics allows both, a gauge may
--   hold NaN) that no increase, share or gauge summary of the cube may be computed from, so the cube,
--   which reads `samples` only, skips them; the load report counts them
-- grain: DML; one row inserted per NaN or infinite staged sample
-- reads: stage_points, stage_series
-- @param dataset_id INTEGER  the new dataset
insert into skipped_samples
select $dataset_id, s.series_id, p.ts, p.value, p.src_line, 'value'
from stage_points as p
inner join stage_series as s using (series_key)
where not isfinite(p.value) and bad_point_reason(p.ts, p.value, s.mtype, s.suffix) = 'value'
