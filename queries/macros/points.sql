-- name: macros/points
-- purpose: why no number may be computed from a sample (NULL: it may): `time`, a time outside the
--   years 1 to 9999 (NULL from the reader); `value`, NaN or infinite (except a summary's quantile,
--   where NaN means "no observation yet"); `negative`, below 0 in a series that only counts up (a
--   counter's `_total`, a histogram's or summary's `_bucket`/`_count`), which would make a false
--   reset or an infinite increase. `mtype` and `suffix` are the series' (ingest__staged_series).

create or replace macro bad_point_reason(ts, value, mtype, suffix) as
    case
        when ts is null then 'time'
        when not isfinite(value) and not (mtype = 'summary' and suffix = '') then 'value'
        when value < 0 and suffix in ('bucket', 'count', 'total')
            and mtype in ('counter', 'histogram', 'gaugehistogram', 'summary') then 'negative'
    end;
