-- name: records__from_simulator
-- purpose: per-request records written by Headroom's simulator (Parquet), in the record schema; the
--   path is the served model name, as the metrics label it
-- grain: one row per request
-- reads: $path
-- @param path VARCHAR  the Parquet file
-- @returns path VARCHAR, replica VARCHAR, arrival TIMESTAMP, first_token TIMESTAMP, finish TIMESTAMP,
--   ttft_s DOUBLE, tpot_s DOUBLE, e2e_s DOUBLE, queue_s DOUBLE, prompt_tokens BIGINT,
--   output_tokens BIGINT, finished_reason VARCHAR
with
raw as (
    select * from read_parquet($path)
),

final as (
    select
        cast(model_name as varchar) as path,
        cast(replica as varchar) as replica,
        cast(arrival as timestamp) as arrival,
        cast(first_token as timestamp) as first_token,
        cast(finish as timestamp) as finish,
        cast(ttft_s as double) as ttft_s,
        cast(tpot_s as double) as tpot_s,
        cast(e2e_s as double) as e2e_s,
        cast(queue_s as double) as queue_s,
        cast(prompt_tokens as bigint) as prompt_tokens,
        cast(output_tokens as bigint) as output_tokens,
        cast(finished_reason as varchar) as finished_reason
    from raw
)

select * from final
