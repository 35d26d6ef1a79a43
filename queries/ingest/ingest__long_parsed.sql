-- name: ingest__long_parsed
-- purpose: each row of a long-format CSV/Parquet file (`long_input`) with its sample time parsed
--   (once per distinct time text; a native timestamp column arrives as `ts_native`, UTC, and is
--   taken as it is) and its value as a number; a time or value that does not parse is NULL here
--   (`ingest__long_problems` reports it before the file loads). Time rules: an integer is Unix
--   time whose unit follows its magnitude (< 1e11 seconds, < 1e14 milliseconds, < 1e17
--   microseconds, else nanoseconds); a decimal number likewise; else an ISO-8601 date-time, UTC
--   unless it ends with `Z` or an offset. With `decimal_comma` set in the one-row table
--   `long_options` (a `;`-separated CSV, as Excel saves one in comma-decimal locales) a value such
--   as `1,5` or `1.234,5` is read as 1.5 or 1234.5; a value that is a number as it stands is taken
--   as it is. The reader makes this query the view `long_parsed` (a view takes no parameters,
--   hence the table), read by `ingest__long_points` and `ingest__long_problems`.
-- grain: one row per row of the file
-- reads: long_input, long_options
-- @returns src_line BIGINT, metric VARCHAR, labels_json VARCHAR, label_values VARCHAR[], ts TIMESTAMP,
--   value DOUBLE
with
ts_texts as (
    select distinct ts_text from long_input where ts_native is null and ts_text is not null
),

ts_numbers as (
    select
        ts_text,
        trim(ts_text) as t,
        case when regexp_full_match(trim(ts_text), '[+-]?\d{1,19}') then try_cast(trim(ts_text) as hugeint) end
            as n_int,
        try_cast(trim(ts_text) as double) as n_float
    from ts_texts
),

ts_parsed as (
    select
        ts_text,
        case
            when n_int is not null then make_timestamp(cast(case
                when abs(n_int) < 100000000000 then n_int * 1000000
                when abs(n_int) < 100000000000000 then n_int * 1000
                when abs(n_int) < 100000000000000000 then n_int
                else n_int // 1000
            end as bigint))
            when n_float is not null and isfinite(n_float) then make_timestamp(cast(round(case
                when abs(n_float) < 1e11 then n_float * 1e6
                when abs(n_float) < 1e14 then n_float * 1e3
                when abs(n_float) < 1e17 then n_float
                else n_float / 1e3
            end) as bigint))
            when regexp_matches(t, '\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?\s*(?:[Zz]|[+-]\d{2}(?::?\d{2})?)$')
                then timezone('UTC', try_cast(t as timestamptz))
            else try_cast(t as timestamp)
        end as ts
    from ts_numbers
),

final as (
    select
        i.src_line,
        i.metric,
        i.labels_json,
        i.label_values,
        coalesce(i.ts_native, p.ts) as ts,
        coalesce(
            try_cast(i.value_raw as double),
            case when o.decimal_comma and regexp_full_match(trim(i.value_raw::varchar), '[+-]?\d{1,3}(\.\d{3})*,\d+|[+-]?\d+,\d+')
                then try_cast(replace(replace(trim(i.value_raw::varchar), '.', ''), ',', '.') as double) end
        ) as value
    from long_input as i
    left join ts_parsed as p on p.ts_text = i.ts_text
    cross join long_options as o
)

select * from final
