-- name: ingest__promjson_responses
-- purpose: the responses of a Prometheus HTTP API JSON file: one `/api/v1/query_range` (matrix) or
--   `/api/v1/query` (vector) response, a JSON array of them, or a bare `result` list as
--   prometheus-api-client returns it (one row per series then). `result` is parsed leniently
--   (json_transform) only for matrix/vector results; scalar/string results and errors keep NULL.
-- grain: one row per response (or bare series) in file order
-- reads: $path
-- @param path VARCHAR  the (uncompressed) JSON file
-- @param max_object_size BIGINT  largest JSON object to accept (the file's size: DuckDB sizes its buffer by it)
-- @returns response_no BIGINT, status VARCHAR, error_type VARCHAR, error VARCHAR, result_type VARCHAR,
--   result STRUCT(metric MAP(VARCHAR, VARCHAR), "values" VARCHAR[][], "value" VARCHAR[], histograms JSON, histogram JSON)[]
with
documents as (
    select
        row_number() over () as response_no,
        status,
        errorType as error_type,
        "error",
        data,
        metric,
        "values",
        "value",
        histograms,
        histogram
    from read_json(
        $path,
        format = 'auto',
        maximum_object_size = $max_object_size,
        columns = {
            status: 'VARCHAR',
            errorType: 'VARCHAR',
            "error": 'VARCHAR',
            data: 'STRUCT(resultType VARCHAR, result JSON)',
            metric: 'MAP(VARCHAR, VARCHAR)',
            "values": 'VARCHAR[][]',
            "value": 'VARCHAR[]',
            histograms: 'JSON',
            histogram: 'JSON'
        }
    )
),

final as (
    select
        response_no,
        case when metric is not null and data is null then 'success' else status end as status,
        error_type,
        "error",
        case when metric is not null and data is null then 'series' else data.resultType end as result_type,
        case
            when metric is not null and data is null then [{
                'metric': metric, 'values': "values", 'value': "value",
                'histograms': histograms, 'histogram': histogram
            }]
            when data.resultType in ('matrix', 'vector') then json_transform(
                data.result,
                '[{"metric": "MAP(VARCHAR, VARCHAR)", "values": "VARCHAR[][]", "value": "VARCHAR[]", '
                || '"histograms": "JSON", "histogram": "JSON"}]'
            )
        end as result
    from documents
)

select * from final
