-- name: ingest__aiperf_entries
-- purpose: the metric entries of an AIPerf `server_metrics_export.jsonl` (one scrape of one
--   endpoint per line: `{"endpoint_url", "timestamp_ns", "metrics": {"<family>": [entry, ...]}}`),
--   one row per (line, family, entry); an entry is `{"labels", "value"}` (counter, gauge) or
--   `{"labels", "buckets"|"histogram": {"<le>": cumulative count}, "sum", "count"}` (histogram).
--   `instance` is the scrape target `host:port` of endpoint_url (the entry's own `instance` label
--   wins later); `labels_key` is the entry's labels as JSON text, a cheap exact series key part.
-- grain: one row per metric entry per line
-- reads: $path
-- @param path VARCHAR  the (uncompressed) JSON-lines file
-- @param max_object_size BIGINT  largest JSON object to accept (the file's size: DuckDB sizes its buffer by it)
-- @returns line_no BIGINT, ts TIMESTAMP, instance VARCHAR, family VARCHAR, labels MAP(VARCHAR, VARCHAR),
--   labels_key VARCHAR, value DOUBLE, buckets MAP(VARCHAR, DOUBLE), sum DOUBLE, count DOUBLE, has_value BOOLEAN
with
records as (
    select
        row_number() over () as line_no,
        make_timestamp(timestamp_ns // 1000) as ts,
        regexp_extract(endpoint_url, '^[A-Za-z][A-Za-z0-9+.-]*://(?:[^@/]*@)?([^/?#]+)', 1) as instance,
        metrics
    from read_json(
        $path,
        format = 'newline_delimited',
        maximum_object_size = $max_object_size,
        columns = {endpoint_url: 'VARCHAR', timestamp_ns: 'BIGINT', metrics: 'MAP(VARCHAR, JSON)'}
    )
),

families as (
    select line_no, ts, instance, unnest(map_entries(metrics)) as fam
    from records
),

entries as (
    select line_no, ts, instance, fam.key as family, unnest(cast(fam.value as json[])) as entry
    from families
),

typed as (
    select
        *,
        json_transform(
            entry,
            '{"labels": "MAP(VARCHAR, VARCHAR)", "value": "DOUBLE", "buckets": "MAP(VARCHAR, DOUBLE)", '
            || '"histogram": "MAP(VARCHAR, DOUBLE)", "sum": "DOUBLE", "count": "DOUBLE"}'
        ) as e
    from entries
),

final as (
    select
        line_no,
        ts,
        nullif(instance, '') as instance,
        family,
        coalesce(e.labels, cast(map() as map(varchar, varchar))) as labels,
        coalesce(to_json(e.labels)::varchar, '{}') as labels_key,
        e.value,
        coalesce(e.buckets, e.histogram) as buckets,
        e.sum,
        e.count,
        json_exists(entry, '$.value') as has_value
    from typed
)

select * from final
