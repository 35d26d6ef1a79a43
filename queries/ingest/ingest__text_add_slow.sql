-- name: ingest__text_add_slow
-- purpose: add the good samples the slow path re-read to `text_split`
-- grain: DML; inserts one row per good re-read sample line
-- reads: text_slow
-- @param ts_unit_us DOUBLE  microseconds per unit of the sample timestamps
insert into text_split
select
    line_no,
    series_key,
    value,
    ts_raw,
    ts_from_unit(ts_raw, $ts_unit_us),
    true
from text_slow
where class = 'sample' and problem is null
