-- name: records__from_vllm_bench
-- purpose: per-request records of a `vllm bench serve --save-result --save-detailed` JSON file.
--   TPOT per request = (latency - ttft) / (output_len - 1), 0 when output_len <= 1 (vLLM's rule);
--   a request with a non-empty error is a failed request. Arrival is `date` plus `start_times`
--   when the file has them (relative seconds), else the benchmark date.
-- grain: one row per request
-- reads: $path
-- @param path VARCHAR  the JSON file
-- @param path_name VARCHAR  path to file the requests under ('' = the file's model_id)
-- @returns path VARCHAR, replica VARCHAR, arrival TIMESTAMP, first_token TIMESTAMP, finish TIMESTAMP,
--   ttft_s DOUBLE, tpot_s DOUBLE, e2e_s DOUBLE, queue_s DOUBLE, prompt_tokens BIGINT,
--   output_tokens BIGINT, finished_reason VARCHAR
with
doc as (
    select cast(j as json) as j from read_json_objects($path, format = 'auto') as t(j)
),

arrays as (
    select
        coalesce(nullif($path_name, ''), j ->> '$.model_id', 'vllm-bench') as path_name,
        strptime(j ->> '$.date', '%Y%m%d-%H%M%S') as bench_date,
        cast(j -> '$.ttfts' as double[]) as ttfts,
        cast(j -> '$.latencies' as double[]) as latencies,
        cast(j -> '$.input_lens' as bigint[]) as input_lens,
        cast(j -> '$.output_lens' as bigint[]) as output_lens,
        cast(j -> '$.errors' as varchar[]) as errors,
        cast(j -> '$.start_times' as double[]) as start_times
    from doc
),

requests as (
    select
        path_name,
        bench_date,
        unnest(generate_series(1, len(ttfts))) as i,
        ttfts,
        latencies,
        input_lens,
        output_lens,
        errors,
        start_times
    from arrays
),

final as (
    select
        path_name as path,
        cast(null as varchar) as replica,
        bench_date + to_microseconds(cast(coalesce(start_times[i] - start_times[1], 0) * 1e6 as bigint))
            as arrival,
        arrival + to_microseconds(cast(ttfts[i] * 1e6 as bigint)) as first_token,
        arrival + to_microseconds(cast(latencies[i] * 1e6 as bigint)) as finish,
        ttfts[i] as ttft_s,
        case when output_lens[i] > 1 then (latencies[i] - ttfts[i]) / (output_lens[i] - 1) else 0 end
            as tpot_s,
        latencies[i] as e2e_s,
        cast(null as double) as queue_s,
        input_lens[i] as prompt_tokens,
        output_lens[i] as output_tokens,
        case when coalesce(errors[i], '') != '' then 'error' else 'stop' end as finished_reason
    from requests
)

select * from final
