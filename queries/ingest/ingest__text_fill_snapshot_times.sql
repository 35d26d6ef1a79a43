-- name: ingest__text_fill_snapshot_times
-- purpose: give each sample without a timestamp the time of its snapshot: the latest entry of
--   `text_snapshots` that starts at or before its line
-- grain: DML; updates one row per sample without a timestamp
-- reads: text_snapshots, text_split
update text_split as p
set ts = s.snap_ts
from (
    select u.line_no, t.snap_ts
    from text_split as u
    asof inner join text_snapshots as t on u.line_no >= t.start_line
    where u.ts_raw is null
) as s
where p.line_no = s.line_no
