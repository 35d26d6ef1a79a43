-- name: summary__engines
-- purpose: the engines whose metrics the staged cube series come from, most series first. vLLM is
--   split by generation: V1 (0.8.3+) labels every series with `engine`, V0 does not.
-- grain: one row per engine
-- reads: cube_series, series
-- @returns engine VARCHAR, n_series BIGINT
with
tagged as (
    select
        case
            when cs.engine = 'vllm' and s.labels['engine'] is not null then 'vllm-v1'
            when cs.engine = 'vllm' then 'vllm-v0'
            else cs.engine
        end as engine,
        cs.series_id
    from cube_series as cs
    inner join series as s using (series_id)
),

final as (
    select engine, count(distinct series_id) as n_series
    from tagged
    group by engine
    order by n_series desc, engine
)

select * from final
