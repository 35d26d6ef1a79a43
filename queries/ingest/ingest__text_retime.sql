-- name: ingest__text_retime
-- purpose: convert the sample timestamps of `text_split` again with another unit (when the values
--   show the file's declared unit cannot be right, e.g. milliseconds in an OpenMetrics file)
-- grain: DML; updates one row per sample with a timestamp
-- reads: text_split
-- @param ts_unit_us DOUBLE  microseconds per unit of the sample timestamps
update text_split
set ts = ts_from_unit(ts_raw, $ts_unit_us)
where ts_raw is not null
