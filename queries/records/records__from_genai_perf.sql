-- name: records__from_genai_perf
-- purpose: per-request records of a GenAI-Perf / perf_analyzer `profile_export.json`. TTFT is the
--   first response timestamp minus the request timestamp (ns); TPOT per request is the mean gap
--   between responses, (last - first) / (responses - 1): per response, which equals per token only
--   when every streamed response carries one token.
-- grain: one row per request
-- reads: $path
-- @param path VARCHAR  the JSON file (the slim copy `app.records` makes: prompts and responses as null)
-- @param max_object_size BIGINT  the file's size (the whole file is one JSON object)
-- @param path_name VARCHAR  path to file the requests under ('' = 'genai-perf')
-- @returns path VARCHAR, replica VARCHAR, arrival TIMESTAMP, first_token TIMESTAMP, finish TIMESTAMP,
--   ttft_s DOUBLE, tpot_s DOUBLE, e2e_s DOUBLE, queue_s DOUBLE, prompt_tokens BIGINT,
--   output_tokens BIGINT, finished_reason VARCHAR
with
doc as (
    -- typed: DuckDB's JSON reader parses straight into these lists and skips every other member
    select *
    from read_json(
        $path, format = 'auto', maximum_object_size = $max_object_size,
        columns = {experiments: 'STRUCT("requests" STRUCT("timestamp" HUGEINT, response_timestamps HUGEINT[])[])[]'}
    )
),

experiments as (
    select unnest(experiments) as e from doc
),

requests as (
    select unnest(e.requests) as r from experiments
),

fields as (
    select
        r.timestamp as t0,
        r.response_timestamps as resp
    from requests
),

final as (
    select
        coalesce(nullif($path_name, ''), 'genai-perf') as path,
        cast(null as varchar) as replica,
        make_timestamp(cast(t0 // 1000 as bigint)) as arrival,
        make_timestamp(cast(resp[1] // 1000 as bigint)) as first_token,
        make_timestamp(cast(resp[len(resp)] // 1000 as bigint)) as finish,
        cast(resp[1] - t0 as double) / 1e9 as ttft_s,
        case when len(resp) > 1 then cast(resp[len(resp)] - resp[1] as double) / 1e9 / (len(resp) - 1) else 0 end
            as tpot_s,
        cast(resp[len(resp)] - t0 as double) / 1e9 as e2e_s,
        cast(null as double) as queue_s,
        cast(null as bigint) as prompt_tokens,
        cast(len(resp) as bigint) as output_tokens,
        case when len(resp) = 0 then 'error' else 'stop' end as finished_reason
    from fields
)

select * from final
