-- name: ingest__long_parse_can_fail
-- purpose: whether any row of a long-format file can have its time or value come out NULL in
--   `long_parsed`: only a row whose time is not a native timestamp column's or whose value does not
--   cast to a number as it stands can. ingest__long_problems reads `long_parsed` for bad rows only
--   when this is true; a typed Parquet file answers it from its column statistics, without reading
--   its rows through the time texts' join
-- grain: one row
-- reads: long_input
-- @returns can_fail BOOLEAN
select exists (
    select 1 from long_input where ts_native is null or try_cast(value_raw as double) is null
) as can_fail
