-- name: ingest__long_problems
-- purpose: the bad rows of a long-format file, first row first: an unreadable time, a value that
--   is not a number, a bad labels JSON or an empty metric name
-- grain: one row per bad row, the first `max_rows` only
-- reads: long_input, long_keys, long_parsed
-- @param max_rows BIGINT  how many bad rows to return
-- @param parse_can_fail BOOLEAN  ingest__long_parse_can_fail's answer (false: no row's time or value
--   failed to parse, and `long_parsed` is not read)
-- @returns src_line BIGINT, problem VARCHAR, n_bad BIGINT
with
bad_rows as (
    -- the time's and the value's texts are looked up in `long_input` for the bad rows only
    select
        r.src_line,
        case
            when r.ts is null and i.ts_text is null then 'the time is missing'
            when r.ts is null then 'time ''' || coalesce(i.ts_text, '') || ''' is neither an ISO-8601 date-time '
                || 'nor a Unix time'
            when r.value is null then 'value ''' || coalesce(i.value_raw::varchar, '') || ''' is not a number'
        end as problem
    from (select src_line, ts, value from long_parsed where $parse_can_fail and (ts is null or value is null)) as r
    inner join long_input as i using (src_line)
),

bad_keys as (
    -- on the file's rows as read (the keys' problems need no parsed time or value)
    select i.src_line, k.problem
    from long_input as i
    inner join long_keys as k
        on k.raw_metric is not distinct from i.metric
        and k.labels_json is not distinct from i.labels_json
        and k.label_values is not distinct from i.label_values
    where k.problem is not null
),

all_bad as (
    select * from bad_rows where problem is not null
    union all
    select * from bad_keys
),

final as (
    select src_line, min(problem) as problem, count(*) over () as n_bad
    from all_bad
    group by src_line
    order by src_line
    limit $max_rows
)

select * from final
