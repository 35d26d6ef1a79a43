-- name: ingest__text_parse_keys
-- purpose: parse each distinct raw series key of `text_key_input` (`name{labels}`,
--   `{__name__="name", labels}` as promtool dumps it, or `{"utf-8.name", labels}`) into the metric
--   name and a label map with unescaped values (\\ \" \n, as prometheus_client does); `problem`
--   says why a key is not valid (then `metric`/`labels` are NULL). Quoted strings are matched as
--   "(?:[^"\\]|\\.)*" so commas, spaces, braces and escaped quotes inside label values are data.
-- grain: one row per distinct series_key of text_key_input
--   `identity` is the series regardless of label order (name and sorted labels), for snapshot checks.
-- reads: text_key_input
-- @returns series_key VARCHAR, metric VARCHAR, labels MAP(VARCHAR, VARCHAR), problem VARCHAR, identity VARCHAR
with
keys as (
    select series_key, trim(series_key, ' ' || chr(9)) as k
    from text_key_input
),

halves as (
    select
        series_key,
        k,
        strpos(k, '{') as brace,
        case when strpos(k, '{') > 0 then trim(k[1:strpos(k, '{') - 1], ' ' || chr(9)) else k end
            as bare_name,
        case when strpos(k, '{') > 0 then k[strpos(k, '{') + 1:] end as after_brace
    from keys
),

bodies as (
    select
        *,
        case when ends_with(after_brace, '}') then left(after_brace, length(after_brace) - 1) end as body
    from halves
),

terms as (
    select
        *,
        regexp_full_match(
            coalesce(body, ''),
            '\s*(?:(?:"(?:[^"\\]|\\.)*"|[a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=\s*"(?:[^"\\]|\\.)*")?\s*'
            || '(?:,\s*(?:"(?:[^"\\]|\\.)*"|[a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=\s*"(?:[^"\\]|\\.)*")?\s*)*,?\s*)?'
        ) as body_ok,
        regexp_extract_all(
            coalesce(body, ''), '("(?:[^"\\]|\\.)*"|[a-zA-Z_][a-zA-Z0-9_]*)\s*(=\s*("(?:[^"\\]|\\.)*"))?', 1
        ) as raw_names,
        regexp_extract_all(
            coalesce(body, ''), '("(?:[^"\\]|\\.)*"|[a-zA-Z_][a-zA-Z0-9_]*)\s*(=\s*("(?:[^"\\]|\\.)*"))?', 2
        ) as raw_assign,
        regexp_extract_all(
            coalesce(body, ''), '("(?:[^"\\]|\\.)*"|[a-zA-Z_][a-zA-Z0-9_]*)\s*(=\s*("(?:[^"\\]|\\.)*"))?', 3
        ) as raw_values,
        contains(regexp_replace(coalesce(body, after_brace, ''), '"(?:[^"\\]|\\.)*"', '', 'g'), '"')
            as open_quote
    from bodies
),

unquoted as (
    -- a quoted string loses its quotes and its escapes: split on escaped backslashes first so
    -- `\\n` stays a backslash and an n
    select
        *,
        list_transform(
            raw_names,
            lambda s: case when starts_with(s, '"') then array_to_string(list_transform(
                string_split(s[2:-2], '\\'),
                lambda p: replace(replace(p, '\"', '"'), '\n', chr(10))
            ), '\') else s end
        ) as names,
        list_transform(
            raw_values,
            lambda s: array_to_string(list_transform(
                string_split(s[2:-2], '\\'),
                lambda p: replace(replace(p, '\"', '"'), '\n', chr(10))
            ), '\')
        ) as values_,
        list_transform(raw_assign, lambda a: coalesce(a, '') <> '') as is_label,
        list_transform(raw_names, lambda s: starts_with(s, '"')) as is_quoted
    from terms
),

entries as (
    select
        *,
        list_filter(names, lambda n, i: is_label[i]) as label_names,
        list_filter(values_, lambda v, i: is_label[i]) as label_values,
        list_filter(names, lambda n, i: not is_label[i] and is_quoted[i]) as name_terms,
        list_filter(names, lambda n, i: not is_label[i] and not is_quoted[i]) as bare_terms
    from unquoted
),

named as (
    select
        *,
        list_position(label_names, '__name__') as name_label_pos,
        coalesce(
            nullif(bare_name, ''),
            name_terms[1],
            label_values[list_position(label_names, '__name__')]
        ) as metric_name,
        (bare_name <> '')::int + len(name_terms) + (list_position(label_names, '__name__') is not null)::int
            as name_count
    from entries
),

checked as (
    select
        *,
        case
            when k = '' then 'expected `name{labels} value [timestamp]`'
            when brace > 0 and body is null and open_quote then 'unterminated label value'
            when brace > 0 and body is null then 'the label set is not closed with `}`'
            when open_quote then 'unterminated label value'
            when not body_ok
                then 'bad label set: expected name="value" pairs separated by commas'
            when len(bare_terms) > 0
                then 'label ''' || bare_terms[1] || ''' has no value (expected name="value")'
            when name_count = 0 then 'no metric name'
            when name_count > 1 then 'the metric name is given more than once'
            when bare_name <> '' and not regexp_full_match(bare_name, '[a-zA-Z_:][a-zA-Z0-9_:]*')
                then 'metric name ''' || bare_name || ''' is not valid'
            when metric_name = '' then 'the metric name is empty'
            when len(list_distinct(label_names)) < len(label_names)
                then 'label ''' || list_filter(
                    label_names, lambda n: len(list_filter(label_names, lambda m: m = n)) > 1
                )[1] || ''' appears twice'
            when list_contains(label_names, '') then 'a label name is empty'
        end as problem
    from named
),

labelled as (
    select
        series_key,
        case when problem is null then metric_name end as metric,
        case when problem is null then map(
            list_filter(label_names, lambda n: n <> '__name__'),
            list_filter(label_values, lambda v, i: label_names[i] <> '__name__')
        ) end as labels,
        problem
    from checked
),

final as (
    select
        *,
        -- readable and unambiguous: values quoted as JSON strings
        metric || '{' || array_to_string(list_transform(
            list_sort(map_entries(labels)), lambda e: e.key || '=' || to_json(e.value)
        ), ',') || '}' as identity
    from labelled
)

select * from final
