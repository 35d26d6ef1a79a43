-- name: ingest__check_add_inf_points
-- purpose: the samples of the repaired `+Inf` buckets: each `_count` sample again, under the new key,
--   but those of a `_count` no number may be computed from (macro bad_point_reason: the load
--   stores neither, and names only the `_count`'s)
-- grain: DML; inserts one row per good `_count` sample of a repaired histogram label set
-- reads: check_missing_inf, stage_points, stage_series
insert into stage_points (series_key, ts, value, src_line)
select m.inf_key, p.ts, p.value, p.src_line
from stage_points as p
inner join check_missing_inf as m on p.series_key = m.count_key
inner join stage_series as s on s.series_key = p.series_key
where bad_point_reason(p.ts, p.value, s.mtype, s.suffix) is null
