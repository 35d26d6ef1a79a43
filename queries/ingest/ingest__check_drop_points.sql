-- name: ingest__check_drop_points
-- purpose: remove the samples `ingest__check_bad_points` found (materialized as check_bad_points)
--   from the staged samples (the store never took them), so that what reads the staged samples
--   after the load stored them (notes on duplicates, time range, `_count` against `+Inf`) sees what
--   it stored
-- grain: DML; deletes one row per bad sample
-- reads: check_bad_points, stage_points
delete from stage_points as p
where exists (
    select 1
    from check_bad_points as b
    where p.series_key = b.series_key
        and p.src_line = b.src_line
        and p.ts is not distinct from b.ts
        and p.value is not distinct from b.value
)
