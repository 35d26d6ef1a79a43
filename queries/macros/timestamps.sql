-- name: macros/timestamps
-- purpose: a sample's own timestamp from the text exposition, given in a unit the reader decides
--   (ms for Prometheus text, s for OpenMetrics, or another when the values show the declared unit
--   is wrong): raw * unit_us µs since the epoch, rounded. A time beyond 2.5e17 µs (after the year
--   9900, past what Python's datetime holds) is NULL rather than an out-of-range error.
create or replace macro ts_from_unit(raw, unit_us) as
    case when abs(raw * unit_us) < 2.5e17 then make_timestamp(cast(round(raw * unit_us) as bigint)) end;
