-- name: capacity__kv_config
-- purpose: KV-cache capacity in tokens per replica from engine config series: vLLM's
--   cache_config_info (num_gpu_blocks x block_size labels) or SGLang's max_total_num_tokens gauge,
--   also under a re-export prefix (Ray Serve LLM's `ray_vllm:cache_config_info`)
-- grain: one row per replica that exports a config
-- reads: samples, series
-- @param dataset_ids INTEGER[]  datasets to read
-- @returns replica VARCHAR, kv_tokens DOUBLE, block_size DOUBLE, source VARCHAR
with
config as (
    select s.replica, s.family, s.labels, max(p.value) as value
    from series as s
    inner join samples as p using (series_id)
    where list_contains($dataset_ids, p.dataset_id)
        and regexp_full_match(s.family, '(.*[_:])?(vllm:cache_config_info|sglang:max_total_num_tokens)')
    group by all
),

final as (
    select
        replica,
        max(
            case
                when suffix(family, 'vllm:cache_config_info')
                    then try_cast(labels['num_gpu_blocks'] as double) * try_cast(labels['block_size'] as double)
                else value
            end
        ) as kv_tokens,
        max(try_cast(labels['block_size'] as double)) as block_size,
        any_value(family) as source
    from config
    group by replica
    having kv_tokens > 0
    order by replica
)

select * from final
