-- name: demand__cached_share_by_window
-- purpose: the share of prompt tokens the prefix cache served, per window and path, as an exact ratio of
--   counter increases: `cached_tokens` as the demand reads them (vllm:prefix_cache_hits_total, else
--   vllm:prompt_tokens_cached_total; null where neither is exported) over vllm:prompt_tokens_total;
--   beside it the local cache's lookups and hits (vllm:prefix_cache_queries_total / _hits_total) and
--   their ratio, the hit rate vLLM's own dashboard plots (lookups count a preempted request's tokens again)
-- grain: one row per (window_start, path) with a prompt-token or prefix-cache counter
-- reads: cube_rows
-- @param cube_id INTEGER  a cube whose paths are traffic paths
-- @returns window_start TIMESTAMP, path VARCHAR, prompt_tokens DOUBLE, cached_tokens DOUBLE, cached_share DOUBLE,
--   queries DOUBLE, hits DOUBLE, hit_rate DOUBLE
with
counters as (
    select window_start, path, signal, value
    from cube_rows
    where cube_id = $cube_id and stat = 'increase' and le is null
        and signal in ('prompt_tokens_total', 'prefix_cache_queries_total', 'prefix_cache_hits_total',
                       'prompt_tokens_cached_total')
),

per_window as (
    select
        window_start,
        path,
        sum(value) filter (where signal = 'prompt_tokens_total') as prompt_tokens,
        sum(value) filter (where signal = 'prefix_cache_queries_total') as queries,
        sum(value) filter (where signal = 'prefix_cache_hits_total') as hits,
        sum(value) filter (where signal = 'prompt_tokens_cached_total') as any_cache_tokens
    from counters
    group by all
),

final as (
    select
        window_start,
        path,
        prompt_tokens,
        coalesce(hits, any_cache_tokens) as cached_tokens,
        case when prompt_tokens > 0 then coalesce(hits, any_cache_tokens) / prompt_tokens end as cached_share,
        queries,
        hits,
        case when queries > 0 then hits / queries end as hit_rate
    from per_window
    order by path, window_start
)

select * from final
