-- name: ingest__vm_series
-- purpose: the series of a VictoriaMetrics `/api/v1/export` JSON-lines file: one series per line,
--   `{"metric": {...}, "values": [...], "timestamps": [ms, ...]}`, with a canonical series key
--   (sorted labels as JSON) and what is wrong with a malformed line
-- grain: one row per line (series)
-- reads: $path
-- @param path VARCHAR  the (uncompressed) JSON-lines file
-- @param max_object_size BIGINT  largest JSON object to accept (the file's size: DuckDB sizes its buffer by it)
-- @returns line_no BIGINT, series_key VARCHAR, metric VARCHAR, labels MAP(VARCHAR, VARCHAR),
--   vals VARCHAR[], stamps VARCHAR[], display VARCHAR, problem VARCHAR
with
records as (
    select
        row_number() over () as line_no,
        metric,
        "values" as vals,
        timestamps as stamps
    from read_json(
        $path,
        format = 'newline_delimited',
        maximum_object_size = $max_object_size,
        columns = {metric: 'MAP(VARCHAR, VARCHAR)', "values": 'VARCHAR[]', timestamps: 'VARCHAR[]'}
    )
),

final as (
    select
        line_no,
        to_json(list_sort(map_entries(metric)))::varchar as series_key,
        metric['__name__'] as metric,
        map_from_entries(list_filter(map_entries(metric), lambda e: e.key <> '__name__')) as labels,
        vals,
        stamps,
        -- '{}' for a line without a "metric" object (its problem says so)
        coalesce(coalesce(metric['__name__'], '') || '{' || array_to_string(list_transform(
            list_filter(list_sort(map_entries(metric)), lambda e: e.key <> '__name__'),
            lambda e: e.key || '="' || coalesce(e.value, '') || '"'
        ), ',') || '}', '{}') as display,
        case
            when metric is null then 'no "metric" object'
            when coalesce(metric['__name__'], '') = '' then 'the series has no metric name (__name__)'
            when vals is null or stamps is null then 'no "values" or "timestamps" list'
            when len(vals) <> len(stamps) then
                len(vals) || ' values but ' || len(stamps) || ' timestamps'
            when list_bool_or(list_transform(vals, lambda v: try_cast(v as double) is null))
                then 'value ''' || list_filter(vals, lambda v: try_cast(v as double) is null)[1]
                    || ''' is not a number'
            when list_bool_or(list_transform(stamps, lambda t: try_cast(t as bigint) is null))
                then 'timestamp ''' || list_filter(stamps, lambda t: try_cast(t as bigint) is null)[1]
                    || ''' is not an integer of milliseconds'
        end as problem
    from records
)

select * from final
