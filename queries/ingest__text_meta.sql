-- name: ingest__text_meta
-- purpose: the comment lines of `text_lines`: `# HELP`, `# TYPE`, `# UNIT`, `# EOF` and free
--   comments, with the declared family name (quotes and escapes removed), type and help text, and
--   what is wrong with a malformed TYPE line
-- grain: one row per line starting with `#`
-- reads: text_lines
-- @returns line_no BIGINT, kind VARCHAR, family VARCHAR, mtype VARCHAR, help VARCHAR,
--   problem VARCHAR, line VARCHAR
with
comment_lines as (
    select line_no, line
    from text_lines
    where starts_with(line, '#')
),

parsed as (
    select
        line_no,
        line,
        regexp_extract(
            line,
            '^#[ \t]+(HELP|TYPE|UNIT)[ \t]+("(?:[^"\\]|\\.)*"|[^ \t]+)(?:[ \t]+(.*?))?[ \t]*$',
            ['keyword', 'name', 'rest']
        ) as m
    from comment_lines
),

kinds as (
    select
        line_no,
        line,
        case
            when regexp_full_match(line, '#[ \t]*EOF[ \t]*') then 'eof'
            when m.keyword <> '' then lower(m.keyword)
            else 'comment'
        end as kind,
        case
            when starts_with(m.name, '"') then replace(replace(m.name[2:-2], '\"', '"'), '\\', '\')
            else m.name
        end as family,
        m.name as raw_name,
        m.rest as rest
    from parsed
),

final as (
    select
        line_no,
        kind,
        case when kind in ('help', 'type', 'unit') then family end as family,
        case when kind = 'type' then lower(rest) end as mtype,
        case when kind = 'help' then array_to_string(list_transform(
            string_split(rest, '\\'), lambda p: replace(p, '\n', chr(10))
        ), '\') end as help,
        case
            when kind = 'type' and rest = '' then 'TYPE line without a type (expected `# TYPE name type`)'
            when kind = 'type' and lower(rest) not in (
                'counter', 'gauge', 'histogram', 'summary', 'untyped', 'unknown', 'info', 'stateset',
                'gaugehistogram'
            ) then 'unknown metric type ''' || rest || ''''
            when kind in ('help', 'type', 'unit') and not starts_with(raw_name, '"')
                and not regexp_full_match(raw_name, '[a-zA-Z_:][a-zA-Z0-9_:]*')
                then 'metric name ''' || raw_name || ''' is not valid'
        end as problem,
        line
    from kinds
)

select * from final
