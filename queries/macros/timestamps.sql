-- name: macros/timestamps
-- purpose: a sample's own timestamp from the text exposition, given in a unit the reader decides
--   (ms for Prometheus text, s for OpenMetrics, or another when the values show the declared unit
--   is wrong): raw * unit_us µs since the epoch, rounded. A time outside the years 1 to 9999 (what
--   Python's datetime holds) is NULL rather than an out-of-range error; the readers drop such samples
--   and say which.
create or replace macro ts_from_unit(raw, unit_us) as
    case when raw * unit_us between -62135596800e6 and 253402300799e6
        then make_timestamp(cast(round(raw * unit_us) as bigint)) end;
