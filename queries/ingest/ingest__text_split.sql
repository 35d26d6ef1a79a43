-- name: ingest__text_split
-- purpose: fast split of each sample line of `text_lines` into its raw series key (the name and
--   `{...}` up to the LAST `}`: label values may hold `}`, values and timestamps never do), value
--   and optional timestamp, with cheap string functions only (a regex per line is 3x slower).
--   `ok` is false where the line is not exactly `key value[ timestamp]` with single spaces;
--   such lines are re-read by ingest__text_slow_lines (tabs, extra spaces, exemplars, errors).
--   A key that only looks right (an exemplar's `}` taken as the end) fails key validation in
--   ingest__text_parse_keys and is re-read there too. The table is built in the shape of
--   stage_points (plus ts_raw and ok) so that staging needs no second copy
--   of a million rows (it is renamed to stage_points at the end): `ts` is the sample's own time (NULL
--   where it has none or it is out of range).
-- grain: one row per line that is neither blank nor a comment
-- reads: text_lines
-- @param ts_unit_us DOUBLE  microseconds per unit of the sample timestamps (1000 for ms, 1e6 for s)
-- @returns line_no BIGINT, series_key VARCHAR, value DOUBLE, ts_raw DOUBLE, ts TIMESTAMP, ok BOOLEAN
with
sample_lines as (
    select line_no, line
    from text_lines
    where line is not null and not starts_with(line, '#')
),

split as (
    select
        line_no,
        line,
        case
            when contains(line, '}') then split_part(line, '}', -1)
            when strpos(line, ' ') > 0 then substr(line, strpos(line, ' '))
            else ''
        end as rest
    from sample_lines
),

fields as (
    select
        line_no,
        substr(line, 1, length(line) - length(rest)) as series_key,
        string_split(rest, ' ') as parts
    from split
),

typed as (
    select
        line_no,
        series_key,
        parts,
        try_cast(parts[2] as double) as value,
        try_cast(parts[3] as double) as ts_raw
    from fields
),

final as (
    select
        line_no,
        series_key,
        value,
        ts_raw,
        ts_from_unit(ts_raw, $ts_unit_us) as ts,
        coalesce(
            len(parts) between 2 and 3
            and parts[1] = ''
            and series_key <> ''
            and series_key[1] not in (' ', chr(9))
            and value is not null
            and not contains(parts[2], '_')
            and (len(parts) = 2 or (isfinite(ts_raw) and not contains(parts[3], '_'))),
            false
        ) as ok
    from typed
)

select * from final
