-- name: ingest__text_slow_lines
-- purpose: re-read, with regular expressions, the few lines the fast split could not take (not
--   `key value[ ts]` with single spaces, or a key that failed validation): classify each as a
--   sample, a blank or comment line, an abbreviation line holding only `...`, or a native
--   histogram sample (skipped), and say what is wrong with a bad line. Handles tabs, runs of
--   spaces, leading/trailing whitespace, no space after `}`, and OpenMetrics exemplars
--   (`value [ts] # {labels} value [ts]`, dropped). An exemplar that is not of that shape (the
--   OpenMetrics grammar: one space around `#`, a label set, a number, an optional timestamp; no hex
--   floats) is a malformed line, as the reference parser holds it.
-- grain: one row per re-read line
-- reads: text_keys, text_lines, text_split
-- @returns line_no BIGINT, class VARCHAR, series_key VARCHAR, value DOUBLE, ts_raw DOUBLE,
--   problem VARCHAR, line VARCHAR
with
bad_keys as (
    select series_key from text_keys where problem is not null
),

candidates as (
    select line_no from text_split where not ok
    union
    select s.line_no from text_split as s inner join bad_keys as b using (series_key)
),

lines as (
    select l.line_no, l.line, trim(l.line, ' ' || chr(9)) as t
    from text_lines as l
    inner join candidates as c using (line_no)
),

classified as (
    select
        *,
        case
            when t = '' then 'blank'
            when starts_with(t, '#') then 'comment'
            when regexp_full_match(t, '(\.\.\.|…)+') then 'ellipsis'
            else 'sample'
        end as class,
        regexp_matches(t, '^[^ \t{]*[ \t]*\{') as labelled
    from lines
),

keyed as (
    select
        *,
        case
            when labelled then regexp_extract(t, '^([^ \t{]*[ \t]*\{(?:[^"}]|"(?:[^"\\]|\\.)*")*\})', 1)
            else regexp_extract(t, '^([^ \t]+)', 1)
        end as key_text
    from classified
    where class = 'sample'
),

rests as (
    select
        *,
        substr(t, length(key_text) + 1) as rest
    from keyed
),

fields as (
    select
        *,
        regexp_full_match(rest, '[ \t]*[^ \t]+(?:[ \t]+[^ \t#][^ \t]*)?(?:[ \t]+#.*)?[ \t]*') as shape_ok,
        regexp_extract(
            rest, '^[ \t]*([^ \t]+)(?:[ \t]+([^ \t#][^ \t]*))?', ['value_text', 'ts_text']
        ) as f,
        nullif(regexp_extract(rest, '^[ \t]*[^ \t]+(?:[ \t]+[^ \t#][^ \t]*)?[ \t]+(#.*)$', 1), '') as exemplar
    from rests
),

typed as (
    select
        *,
        nullif(f.value_text, '') as value_text,
        nullif(f.ts_text, '') as ts_text,
        case when not contains(f.value_text, '_') then try_cast(f.value_text as double) end as value,
        case when not contains(f.ts_text, '_') then try_cast(f.ts_text as double) end as ts_raw
    from fields
),

samples as (
    select
        line_no,
        case when starts_with(value_text, '{') then 'native_histogram' else class end as class,
        key_text as series_key,
        value,
        ts_raw,
        case
            when key_text = '' and labelled and contains(
                regexp_replace(t, '"(?:[^"\\]|\\.)*"', '', 'g'), '"'
            ) then 'unterminated label value'
            when key_text = '' and labelled then 'the label set is not closed with `}`'
            when key_text = '' then 'expected `name{labels} value [timestamp]`'
            when value_text is null then 'expected `name{labels} value [timestamp]`: no value after the series'
            when starts_with(value_text, '{') then null
            when not shape_ok then 'unexpected text after the '
                || case when ts_text is null then 'value' else 'timestamp' end
            when value is null then 'value ''' || value_text || ''' is not a number'
            when ts_text is not null and (ts_raw is null or not isfinite(ts_raw))
                then 'timestamp ''' || ts_text || ''' is not a number'
            when exemplar is not null and not regexp_full_match(
                exemplar,
                '# \{(?:[^"}]|"(?:[^"\\]|\\.)*")*\} '
                || '(?:[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?(?i:inf(?:inity)?)|(?i:nan))'
                || '(?: [+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)?'
            ) then 'malformed exemplar ''' || exemplar || ''' (expected `# {labels} value [timestamp]`)'
        end as problem,
        line
    from typed
),

final as (
    select * from samples
    union all
    select line_no, class, null, null, null, null, line
    from classified
    where class <> 'sample'
)

select * from final
