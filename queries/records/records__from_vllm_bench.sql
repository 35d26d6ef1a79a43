-- name: records__from_vllm_bench
-- purpose: per-request records of a `vllm bench serve --save-result --save-detailed` JSON file, in
--   every version's shape. vLLM writes one array per field with a value per request (`ttfts`,
--   `itls` (the gaps between streamed chunks, a list per request), `input_lens`, `output_lens`,
--   `errors`, and in newer versions `start_times`); some forks add `latencies`. E2E is the fork's
--   latency where written, else TTFT plus the sum of the request's gaps; TPOT as vLLM defines it,
--   (E2E - TTFT) / (output tokens - 1), 0 when output tokens <= 1. A request with a non-empty error
--   failed: its times are NULL (vLLM writes 0 for them). `start_times` are `time.perf_counter()`
--   readings upstream, a clock with no epoch: only values that are Unix seconds (>= 1e9, as some
--   forks write) place a request in time; otherwise every time is NULL (shares, no placement).
--   Reads the slim copy `app.records` makes of the fields named below (`app.ingest.jsonscan`:
--   generated texts left out, and the gaps only when no `latencies` exist).
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
            model_id: 'VARCHAR', ttfts: 'DOUBLE[]', latencies: 'DOUBLE[]', itls: 'DOUBLE[][]',
            input_lens: 'BIGINT[]', output_lens: 'BIGINT[]', errors: 'VARCHAR[]', start_times: 'DOUBLE[]'
        }
    )
),

arrays as (
    select
        coalesce(nullif($path_name, ''), model_id, 'vllm-bench') as path_name,
        -- Unix seconds (a fork's wall clock) or perf_counter() readings (upstream): only the former place
        coalesce(list_min(start_times) >= 1e9, false) as absolute,
        ttfts,
        latencies,
        itls,
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
        absolute,
        unnest(generate_series(1, len(ttfts))) as i,
        unnest(ttfts) as ttft,
        unnest(latencies) as latency,
        unnest(itls) as gaps,
        unnest(input_lens) as input_len,
        unnest(output_lens) as output_len,
        unnest(errors) as error,
        unnest(start_times) as start_time
    from arrays
),

timed as (
    select
        path_name,
        coalesce(error, '') != '' as failed,
        case when absolute then make_timestamp(cast(start_time * 1e6 as bigint)) end as arrival,
        ttft,
        coalesce(latency, ttft + coalesce(list_sum(gaps), 0)) as e2e,
        input_len,
        output_len
    from requests
    where i is not null
),

final as (
    select
        path_name as path,
        cast(null as varchar) as replica,
        arrival,
        case when not failed then arrival + to_microseconds(cast(ttft * 1e6 as bigint)) end as first_token,
        case when not failed then arrival + to_microseconds(cast(e2e * 1e6 as bigint)) end as finish,
        case when not failed then ttft end as ttft_s,
        case when failed then null when output_len > 1 then (e2e - ttft) / (output_len - 1) else 0 end as tpot_s,
        case when not failed then e2e end as e2e_s,
        cast(null as double) as queue_s,
        input_len as prompt_tokens,
        output_len as output_tokens,
        case when failed then 'error' else 'stop' end as finished_reason
    from timed
)

select * from final
