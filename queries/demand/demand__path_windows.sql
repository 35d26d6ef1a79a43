-- name: demand__path_windows
-- purpose: observed demand per window and path: first tokens (the earliest request count vLLM
--   exports; it has no arrival counter), mean TTFT (to shift first tokens back to arrivals), prompt
--   and generation tokens, the prompt tokens the prefix cache served (`cached_tokens`: the local
--   prefix cache's hits, else every cached prompt token; null where neither is exported), and the
--   replicas reporting
-- grain: one row per (window_start, path)
-- reads: cube_rows
-- @param cube_id INTEGER  a cube whose paths are traffic paths
-- @returns window_start TIMESTAMP, path VARCHAR, requests DOUBLE, ttft_mean_s DOUBLE, prompt_tokens DOUBLE,
--   generation_tokens DOUBLE, cached_tokens DOUBLE, replicas DOUBLE
with
rows_ as (
    select window_start, path, signal, stat, value
    from cube_rows
    where cube_id = $cube_id and le is null
),

per_window as (
    select
        window_start,
        path,
        sum(value) filter (where signal = 'ttft' and stat = 'count') as requests,
        sum(value) filter (where signal = 'ttft' and stat = 'sum') as ttft_sum,
        sum(value) filter (where signal = 'prompt_tokens_total' and stat = 'increase') as prompt_tokens,
        sum(value) filter (where signal = 'generation_tokens_total' and stat = 'increase') as generation_tokens,
        coalesce(
            sum(value) filter (where signal = 'prefix_cache_hits_total' and stat = 'increase'),
            sum(value) filter (where signal = 'prompt_tokens_cached_total' and stat = 'increase')
        ) as cached_tokens,
        max(value) filter (where stat = 'replicas') as replicas
    from rows_
    group by all
),

final as (
    select
        window_start,
        path,
        requests,
        case when requests > 0 then ttft_sum / requests end as ttft_mean_s,
        prompt_tokens,
        generation_tokens,
        cached_tokens,
        replicas
    from per_window
    where requests is not null
    order by path, window_start
)

select * from final
