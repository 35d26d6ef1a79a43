-- name: capacity__step_token_buckets
-- purpose: over a cube's whole range, the cumulative bucket counts of the histograms that bound the
--   engine's settings: tokens per engine step (vLLM's iteration_tokens_total: no step holds more
--   than max_num_batched_tokens) and the prompt and generation lengths (vLLM's length buckets stop
--   at max_model_len)
-- grain: one row per (signal, le)
-- reads: cube_rows
-- @param cube_id INTEGER  the cube to read
-- @returns signal VARCHAR, le DOUBLE, observations DOUBLE
with
buckets as (
    select signal, le, value
    from cube_rows
    where cube_id = $cube_id and stat = 'increase' and le is not null
        and signal in ('iteration_tokens', 'prompt_tokens', 'generation_tokens')
),

final as (
    select signal, le, sum(value) as observations
    from buckets
    group by signal, le
    order by signal, le
)

select * from final
