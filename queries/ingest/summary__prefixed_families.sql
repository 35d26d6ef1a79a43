-- name: summary__prefixed_families
-- purpose: the re-export prefixes under which the staged cube series' families were recognised
--   (Ray Serve LLM's `ray_` before vLLM's names), with the engine and how many families, for the
--   load's notes
-- grain: one row per (prefix, engine)
-- reads: cube_series
-- @returns prefix VARCHAR, engine VARCHAR, n_families BIGINT, example VARCHAR
with
prefixed as (
    select prefix, engine, family
    from cube_series
    where prefix != ''
),

final as (
    select prefix, engine, count(distinct family) as n_families, min(family) as example
    from prefixed
    group by prefix, engine
    order by n_families desc, prefix, engine
)

select * from final
