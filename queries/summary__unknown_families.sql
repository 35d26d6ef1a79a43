-- name: summary__unknown_families
-- purpose: metric families of a dataset that map to no signal of any engine (kept, listed)
-- grain: one row per family
-- reads: samples, series, signal_map
-- @param dataset_id INTEGER  the dataset
-- @returns family VARCHAR
with
dataset_families as (
    select distinct s.family
    from series as s
    where s.series_id in (select series_id from samples where dataset_id = $dataset_id)
),

final as (
    select family
    from dataset_families
    where family not in (select family from signal_map)
    order by family
)

select * from final
