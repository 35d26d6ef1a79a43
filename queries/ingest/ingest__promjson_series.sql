-- name: ingest__promjson_series
-- purpose: the series of the Prometheus API responses: metric name (`__name__`), labels, a
--   canonical series key (sorted labels as JSON, so the same series in several responses meets),
--   the float samples as [t, "v"] pairs (a vector's single `value` made a one-pair list) and
--   whether native histogram samples were present (not supported, skipped)
-- grain: one row per series per response
-- reads: promjson_responses
-- @returns series_no BIGINT, response_no BIGINT, series_key VARCHAR, metric VARCHAR,
--   labels MAP(VARCHAR, VARCHAR), pairs VARCHAR[][], has_histograms BOOLEAN, display VARCHAR
with
items as (
    select
        response_no,
        unnest(range(1, len(result) + 1)) as item_no,
        unnest(result) as s
    from promjson_responses
    where result is not null
),

final as (
    select
        row_number() over (order by response_no, item_no) as series_no,
        response_no,
        to_json(list_sort(map_entries(s.metric)))::varchar as series_key,
        s.metric['__name__'] as metric,
        map_from_entries(list_filter(map_entries(s.metric), lambda e: e.key <> '__name__')) as labels,
        coalesce(s."values", case when s."value" is not null then [s."value"] end, []) as pairs,
        coalesce(s.histograms, s.histogram) is not null as has_histograms,
        -- the series as a selector, for messages: name{label="value",...}
        coalesce(s.metric['__name__'], '') || '{' || array_to_string(list_transform(
            list_filter(list_sort(map_entries(s.metric)), lambda e: e.key <> '__name__'),
            lambda e: e.key || '="' || e.value || '"'
        ), ',') || '}' as display
    from items
)

select * from final
