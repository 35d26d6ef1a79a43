-- name: ingest__long_keys
-- purpose: the distinct series of a long-format file with their label maps: the `labels` JSON
--   object (if the file has that column) merged with one label per other column, the column
--   winning; empty values and `__name__` are dropped (an empty label is an absent label). The
--   metric name is the metric column, else the JSON's `__name__`. `problem` says what is wrong.
--   The series key is a short opaque name ('k' and a number) per distinct (metric, labels JSON,
--   label-column values) of `long_input`: `ingest__long_rows` gives it to each row by a join.
-- grain: one row per distinct series key
-- reads: long_input
-- @param label_names VARCHAR[]  the names of the label columns, in the order of label_values
-- @returns series_key VARCHAR, metric VARCHAR, labels MAP(VARCHAR, VARCHAR), problem VARCHAR, first_line BIGINT,
--   raw_metric VARCHAR, labels_json VARCHAR, label_values VARCHAR[]
with
distinct_keys as (
    select
        'k' || row_number() over (order by min(src_line)) as series_key,
        metric,
        labels_json,
        label_values,
        min(src_line) as first_line
    from long_input
    group by metric, labels_json, label_values
),

parsed as (
    select
        *,
        try_cast(labels_json as json) as labels_doc
    from distinct_keys
),

maps as (
    select
        *,
        case when json_type(labels_doc) = 'OBJECT' then cast(labels_doc as map(varchar, varchar)) end
            as json_labels,
        cast(map_from_entries(list_filter(
            list_transform(label_values, lambda v, i: {'key': cast($label_names[i] as varchar), 'value': v}),
            lambda e: coalesce(e.value, '') <> ''
        )) as map(varchar, varchar)) as column_labels
    from parsed
),

named as (
    select
        *,
        coalesce(nullif(metric, ''), json_labels['__name__']) as metric_name,
        map_from_entries(list_filter(
            map_entries(map_concat(coalesce(json_labels, cast(map() as map(varchar, varchar))), column_labels)),
            lambda e: coalesce(e.value, '') <> '' and e.key <> '__name__'
        )) as merged
    from maps
),

final as (
    select
        series_key,
        metric_name as metric,
        merged as labels,
        case
            when nullif(trim(labels_json), '') is not null and json_labels is null
                then 'labels ''' || labels_json || ''' is not a JSON object'
            when coalesce(metric_name, '') = '' then 'the metric name is empty'
        end as problem,
        first_line,
        -- the row values the key stands for (ingest__long_rows joins on them)
        metric as raw_metric,
        labels_json,
        label_values
    from named
)

select * from final
