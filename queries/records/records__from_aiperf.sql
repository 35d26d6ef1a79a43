-- name: records__from_aiperf
-- purpose: per-request records of an AIPerf `profile_export.jsonl` (one MetricRecordInfo per line,
--   successes and errors in any order), in the record schemas of the versions in use: the metadata's
--   start is `request_start_ns` (0.2 and later) or `timestamp_ns` (0.1), its phase
--   `benchmark_phase` or `credit_phase`; TTFT is `time_to_first_token` or `ttft`. Each metric is
--   `{"value", "unit"}` and is converted from its unit (ns, us, ms, s). AIPerf's inter_token_latency
--   is per request, (request_latency - TTFT) / (output tokens - 1): vLLM's TPOT. A record with a
--   non-null `error` failed (a cancelled request, `was_cancelled` or error code 499, is an abort);
--   a failed record holds no latencies (often only `error_request_count`).
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

raw as (
    select
        j ->> '$.metadata.worker_id' as replica,
        coalesce(j ->> '$.metadata.request_start_ns', j ->> '$.metadata.timestamp_ns') as start_ns,
        coalesce(j -> '$.metrics.time_to_first_token', j -> '$.metrics.ttft') as ttft,
        j -> '$.metrics.inter_token_latency' as itl,
        j -> '$.metrics.request_latency' as latency,
        j ->> '$.metrics.input_sequence_length.value' as prompt_tokens,
        j ->> '$.metrics.output_sequence_length.value' as output_tokens,
        coalesce(j ->> '$.metadata.benchmark_phase', j ->> '$.metadata.credit_phase', 'profiling') as phase,
        j -> '$.error' as error,
        coalesce(cast(j ->> '$.metadata.was_cancelled' as boolean), false)
        or coalesce(j ->> '$.error.code' = '499', false) as cancelled
    from lines
),

fields as (
    select
        replica,
        make_timestamp(cast(cast(start_ns as hugeint) // 1000 as bigint)) as arrival,
        cast(ttft ->> 'value' as double) * seconds_per_unit(ttft ->> 'unit') as ttft_s,
        cast(itl ->> 'value' as double) * seconds_per_unit(itl ->> 'unit') as tpot_s,
        cast(latency ->> 'value' as double) * seconds_per_unit(latency ->> 'unit') as e2e_s,
        cast(prompt_tokens as double) as prompt_tokens,
        cast(output_tokens as double) as output_tokens,
        phase,
        case
            when error is not null and json_type(error) != 'NULL' then (case when cancelled then 'abort' else 'error' end)
            when cancelled then 'abort'
            else 'stop'
        end as finished_reason
    from raw
),

final as (
    select
        coalesce(nullif($path_name, ''), 'aiperf') as path,
        replica,
        arrival,
        arrival + to_microseconds(cast(ttft_s * 1e6 as bigint)) as first_token,
        arrival + to_microseconds(cast(e2e_s * 1e6 as bigint)) as finish,
        ttft_s,
        case when finished_reason = 'stop' then coalesce(tpot_s, 0) end as tpot_s,
        e2e_s,
        cast(null as double) as queue_s,
        cast(prompt_tokens as bigint) as prompt_tokens,
        cast(output_tokens as bigint) as output_tokens,
        finished_reason
    from fields
    where phase = 'profiling'
)

select * from final
