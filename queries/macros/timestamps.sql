-- name: macros/timestamps
-- purpose: a sample's own timestamp from the text exposition, given in a unit the reader decides
--   (ms for Prometheus text, s for OpenMetrics, or another when the values show the declared unit
--   is wrong): raw * unit_us µs since the epoch, rounded. A time outside the years 1 to 9999 (what
--   Python's datetime holds) is NULL rather than an out-of-range error; the readers drop such samples
--   and say which.
create or replace macro ts_from_unit(raw, unit_us) as
    case when raw * unit_us between -62135596800e6 and 253402300799e6
        then make_timestamp(cast(round(raw * unit_us) as bigint)) end;

-- seconds per unit of a benchmark's duration field (AIPerf's `{"value", "unit"}`); milliseconds when
-- the unit is missing, as every per-request latency of AIPerf is written
create or replace macro seconds_per_unit(unit) as
    case lower(coalesce(unit, 'ms'))
        when 'ns' then 1e-9
        when 'us' then 1e-6
        when 'ms' then 1e-3
        when 's' then 1.0
        when 'sec' then 1.0
    end;
