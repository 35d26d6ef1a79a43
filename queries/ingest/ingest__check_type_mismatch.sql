-- name: ingest__check_type_mismatch
-- purpose: `# TYPE` lines the samples contradict: a family declared gauge, counter, untyped (or any
--   type but histogram and summary) whose samples are `<family>_bucket` with `le`, `_count` and
--   `_sum` (read as the histogram they are, as Prometheus would store them); a family declared
--   histogram whose samples carry its bare name (no `_bucket`/`_count`/`_sum`: not a histogram's
--   sample, kept as an untyped series)
-- grain: one row per contradicted family
-- reads: stage_series, stage_families
-- @returns family VARCHAR, declared VARCHAR, found VARCHAR, example VARCHAR
with
declared as (
    select family, any_value(mtype) as mtype from stage_families group by family
),

histogram_shaped as (
    select d.family, d.mtype, 'histogram' as found, min(s.metric) as example
    from declared as d
    inner join stage_series as s
        on s.metric in (d.family || '_bucket', d.family || '_count', d.family || '_sum')
    where d.mtype not in ('histogram', 'gaugehistogram', 'summary')
        and s.mtype = 'histogram'
    group by d.family, d.mtype
),

bare_in_histogram as (
    select d.family, d.mtype, 'bare' as found, min(series_text(s.metric, s.labels)) as example
    from declared as d
    inner join stage_series as s on s.metric = d.family and s.suffix = ''
    where d.mtype in ('histogram', 'gaugehistogram')
    group by d.family, d.mtype
),

final as (
    select family, mtype as declared, found, example from histogram_shaped
    union all
    select family, mtype as declared, found, example from bare_in_histogram
    order by family
)

select * from final
