-- name: ingest__check_add_inf_points
-- purpose: the samples of the repaired `+Inf` buckets: each `_count` sample again, under the new key
-- grain: DML; inserts one row per `_count` sample of a repaired histogram label set
-- reads: check_missing_inf, stage_points
insert into stage_points (series_key, ts, value, src_line)
select m.inf_key, p.ts, p.value, p.src_line
from stage_points as p
inner join check_missing_inf as m on p.series_key = m.count_key
