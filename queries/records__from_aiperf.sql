-- name: records__from_aiperf
-- purpose: per-request records of an AIPerf `profile_export.jsonl` (one MetricRecordInfo per line).
--   AIPerf's inter_token_latency is per request: (request_latency - TTFT) / (output tokens - tokens of
--   the first chunk), i.e. a per-request TPOT. Times are in ms; a non-null `error` is a failed request.
-- grain: one row per request (profiling phase only)
-- reads: $path
-- @param path VARCHAR  the JSONL file
-- @param path_name VARCHAR  path to file the requests under ('' = 'aiperf')
-- @returns path VARCHAR, replica VARCHAR, arrival TIMESTAMP, first_token TIMESTAMP, finish TIMESTAMP,
--   ttft_s DOUBLE, tpot_s DOUBLE, e2e_s DOUBLE, queue_s DOUBLE, prompt_tokens BIGINT,
--   output_tokens BIGINT, finished_reason VARCHAR
with
lines as (
    select cast(j as json) as j from read_json_objects($path, format = 'newline_delimited') as t(j)
),

fields as (
    select
        coalesce(nullif($path_name, ''), 'aiperf') as path,
        j ->> '$.metadata.worker_id' as replica,
        make_timestamp(cast(cast(j ->> '$.metadata.request_start_ns' as hugeint) // 1000 as bigint)) as arrival,
        cast(j ->> '$.metrics.time_to_first_token.value' as double) / 1000 as ttft_s,
        cast(j ->> '$.metrics.inter_token_latency.value' as double) / 1000 as tpot_s,
        cast(j ->> '$.metrics.request_latency.value' as double) / 1000 as e2e_s,
        cast(j ->> '$.metrics.input_sequence_length.value' as double) as prompt_tokens,
        cast(j ->> '$.metrics.output_sequence_length.value' as double) as output_tokens,
        coalesce(j ->> '$.metadata.benchmark_phase', 'profiling') as phase,
        j -> '$.error' as error
    from lines
),

final as (
    select
        path,
        replica,
        arrival,
        arrival + to_microseconds(cast(ttft_s * 1e6 as bigint)) as first_token,
        arrival + to_microseconds(cast(e2e_s * 1e6 as bigint)) as finish,
        ttft_s,
        coalesce(tpot_s, 0) as tpot_s,
        e2e_s,
        cast(null as double) as queue_s,
        cast(prompt_tokens as bigint) as prompt_tokens,
        cast(output_tokens as bigint) as output_tokens,
        case when error is null or json_type(error) = 'NULL' then 'stop' else 'error' end as finished_reason
    from fields
    where phase = 'profiling'
)

select * from final
