-- name: summary__unknown_families
-- purpose: metric families of a dataset that map to no signal of any engine (kept, listed), by
--   their name or under a re-export prefix the dataset's cube series were recognised with
-- grain: one row per family
-- reads: cube_series, samples, series, signal_map
-- @param dataset_id INTEGER  the dataset
-- @returns family VARCHAR
with
dataset_families as (
    select distinct s.family
    from series as s
    where s.series_id in (select series_id from samples where dataset_id = $dataset_id)
),

prefixes as (
    select distinct prefix from cube_series where prefix != ''
),

final as (
    select f.family
    from dataset_families as f
    where f.family not in (select family from signal_map)
        and not exists (
            select 1 from prefixes as p
            where starts_with(f.family, p.prefix)
                and substr(f.family, length(p.prefix) + 1) in (select family from signal_map)
        )
    order by f.family
)

select * from final
