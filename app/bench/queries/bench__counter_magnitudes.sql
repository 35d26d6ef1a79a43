-- name: bench__counter_magnitudes
-- purpose: how large the counters behind each cube cell of increases grow: per (path, signal, le,
--   stat) cell key, the sum over the path's series of the largest absolute value a series took.
--   A store that keeps a sample to a relative precision p (VictoriaMetrics: 12 significant decimal
--   digits) can move an increase of that cell by at most 2 p x this magnitude (a window's increase
--   is a difference of two stored samples per series), whatever the increase itself is
-- grain: one row per (path, signal, le, stat), as the cube keys its increases
-- reads: cube_series, samples
-- @param dataset_ids INTEGER[]  datasets to include
-- @returns path VARCHAR, signal VARCHAR, le DOUBLE, stat VARCHAR, magnitude DOUBLE
with
per_series as (
    select cs.series_id, cs.path, cs.signal, cs.kind, cs.suffix, cs.le, cs.scale, max(abs(p.value)) as largest
    from samples as p
    inner join cube_series as cs using (series_id)
    where list_contains($dataset_ids, p.dataset_id)
        and cs.kind in ('histogram', 'counter')
    group by all
),

final as (
    select
        path,
        signal,
        -- as cube__build keys them: a bucket's increase by its bound, a histogram's totals as count
        -- and sum, a counter's increase
        case when kind = 'histogram' and suffix = 'bucket' then le end as le,
        case
            when kind = 'counter' or suffix = 'bucket' then 'increase'
            when suffix = 'count' then 'count'
            else 'sum'
        end as stat,
        sum(largest * case when suffix = 'sum' then scale else 1 end) as magnitude
    from per_series
    group by all
)

select * from final
