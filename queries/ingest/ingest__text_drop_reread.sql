-- name: ingest__text_drop_reread
-- purpose: remove from `text_split` the lines the fast split did not read cleanly or that the slow
--   path re-read (their good samples are added back by ingest__text_add_slow)
-- grain: DML; deletes one row per re-read line
-- reads: text_slow, text_split
delete from text_split
where not ok or line_no in (select line_no from text_slow)
