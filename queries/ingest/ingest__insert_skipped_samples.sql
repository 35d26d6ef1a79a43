-- name: ingest__insert_skipped_samples
-- purpose: keep the staged samples whose value is NaN or infinite (macro bad_point_reason 'value'),
--   or whose time no timestamp holds (reason 'time': outside the years 1 to 9999, NULL from the
--   reader), beside the samples, under the new dataset id: valid samples (OpenMetrics allows NaN and
--   infinities, and any timestamp) that no increase, share or gauge summary of the cube may be
--   computed from, so the cube, which reads `samples` only, skips them; the load report counts them
-- grain: DML; one row inserted per such staged sample
-- reads: stage_points, stage_series
-- @param dataset_id INTEGER  the new dataset
insert into skipped_samples
select $dataset_id, s.series_id, p.ts, p.value, p.src_line, bad_point_reason(p.ts, p.value, s.mtype, s.suffix)
from stage_points as p
inner join stage_series as s using (series_key)
where (p.ts is null or not isfinite(p.value)) and bad_point_reason(p.ts, p.value, s.mtype, s.suffix) in ('value', 'time')
