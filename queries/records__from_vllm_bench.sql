-- name: records__from_vllm_bench
-- purpose: per-request records of a `vllm bench serve --save-result --save-detailed` JSON file.
--   TPOT per request = (latency - ttft) / (output_len - 1), 0 when output_len <= 1 (vLLM's rule);
--   a request with a non-empty error is a failed request. Arrival is `date` plus `start_times`
--   when the file has them (relative seconds), else the benchmark date. Reads the slim copy
--   `app.records` makes of the fields named below (`app.ingest.jsonscan`: per-token gaps and texts
--   left out), so a result of gigabytes is one object of a few bytes per request here.
-- grain: one row per request
-- reads: $path
-- @param path VARCHAR  the JSON file
-- @param max_object_size BIGINT  the file's size (the whole file is one JSON object)
-- @param path_name VARCHAR  path to file the requests under ('' = the file's model_id)
-- @returns path VARCHAR, replica VARCHAR, arrival TIMESTAMP, first_token TIMESTAMP, finish TIMESTAMP,
--   ttft_s DOUBLE, tpot_s DOUBLE, e2e_s DOUBLE, queue_s DOUBLE, prompt_tokens BIGINT,
--   output_tokens BIGINT, finished_reason VARCHAR
with
doc as (
    -- typed columns: DuckDB's JSON reader parses straight into lists (a JSON value cast to a list
    -- takes three times the memory); a member the file lacks is NULL
    select *
    from read_json(
        $path, format = 'auto', maximum_object_size = $max_object_size,
        columns = {
            date: 'VARCHAR', model_id: 'VARCHAR', ttfts: 'DOUBLE[]', latencies: 'DOUBLE[]',
            input_lens: 'BIGINT[]', output_lens: 'BIGINT[]', errors: 'VARCHAR[]', start_times: 'DOUBLE[]'
        }
    )
),

arrays as (
    select
        coalesce(nullif($path_name, ''), model_id, 'vllm-bench') as path_name,
        strptime(date, '%Y%m%d-%H%M%S') as bench_date,
        ttfts,
        latencies,
        input_lens,
        output_lens,
        errors,
        start_times
    from doc
),

requests as (
    -- the arrays side by side (unnest zips them; a shorter one is padded with NULL), one row per ttft
    select
        path_name,
        bench_date,
        start_times[1] as first_start,
        unnest(generate_series(1, len(ttfts))) as i,
        unnest(ttfts) as ttft,
        unnest(latencies) as latency,
        unnest(input_lens) as input_len,
        unnest(output_lens) as output_len,
        unnest(errors) as error,
        unnest(start_times) as start_time
    from arrays
),

final as (
    select
        path_name as path,
        cast(null as varchar) as replica,
        bench_date + to_microseconds(cast(coalesce(start_time - first_start, 0) * 1e6 as bigint))
            as arrival,
        arrival + to_microseconds(cast(ttft * 1e6 as bigint)) as first_token,
        arrival + to_microseconds(cast(latency * 1e6 as bigint)) as finish,
        ttft as ttft_s,
        case when output_len > 1 then (latency - ttft) / (output_len - 1) else 0 end as tpot_s,
        latency as e2e_s,
        cast(null as double) as queue_s,
        input_len as prompt_tokens,
        output_len as output_tokens,
        case when coalesce(error, '') != '' then 'error' else 'stop' end as finished_reason
    from requests
    where i is not null
)

select * from final
