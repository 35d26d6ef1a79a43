-- name: ingest__text_meta
-- purpose: the comment lines of `text_lines`: `# HELP`, `# TYPE`, `# UNIT`, `# EOF` and free
--   comments, with the declared family name (quotes and escapes removed), type and help text, and
--   what is wrong with a malformed TYPE line or one that changes its family's type
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

declared as (
    -- the family's first TYPE line: a later one may repeat it (concatenated snapshots) but not change it
    select
        *,
        first_value(case when kind = 'type' then lower(rest) end ignore nulls) over by_family as first_type,
        first_value(case when kind = 'type' then line_no end ignore nulls) over by_family as first_type_line
    from kinds
    window by_family as (
        partition by kind = 'type', family order by line_no rows between unbounded preceding and current row
    )
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
            when kind = 'type' and lower(rest) <> first_type
                then 'a second TYPE line for ' || family || ' says ' || lower(rest) || ', but line '
                    || first_type_line || ' said ' || first_type
        end as problem,
        line
    from declared
)

select * from final
