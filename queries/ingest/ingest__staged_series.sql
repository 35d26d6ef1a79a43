-- name: ingest__staged_series
-- purpose: classify the staged series of one file: global id, metric family, suffix, type, le,
--   histogram group and replica. The family/suffix rule follows the exposition formats: a
--   `# TYPE` line wins; without one, `_bucket` with `le` (and its `_count`/`_sum` siblings) is a
--   histogram, `_total` a counter (a sample of a histogram family's bare name is untyped); `_created` is always a creation time (0.0.4 exposes it as a
--   separate gauge family). Counter families are named without `_total`, so the two spellings meet.
-- grain: one row per distinct series key of the staged file
-- reads: stage_families, stage_keys
-- @returns series_key VARCHAR, series_id UBIGINT, metric VARCHAR, family VARCHAR, suffix VARCHAR,
--   mtype VARCHAR, labels MAP(VARCHAR, VARCHAR), le DOUBLE, group_id UBIGINT, replica VARCHAR
with
keys as (
    select
        series_key,
        metric,
        labels,
        regexp_extract(metric, '^(.*)_(bucket|count|sum|created|total)$', 1) as base,
        regexp_extract(metric, '^(.*)_(bucket|count|sum|created|total)$', 2) as sfx
    from stage_keys
),

types as (
    select family, any_value(mtype) as mtype from stage_families group by family
),

bucketed_bases as (
    select distinct base from keys where sfx = 'bucket' and labels['le'] is not null
),

classified as (
    select
        k.series_key,
        k.metric,
        k.labels,
        case
            when k.sfx = 'created' then [k.base, 'created', coalesce(tb.mtype, 'counter')]
            when k.sfx in ('bucket', 'count', 'sum')
                and tb.mtype in ('histogram', 'gaugehistogram', 'summary')
                then [k.base, k.sfx, tb.mtype]
            when k.sfx = 'total' and tb.mtype = 'counter' then [k.base, 'total', 'counter']
            when te.mtype = 'counter'
                then [regexp_replace(k.metric, '_total$', ''), 'total', 'counter']
            -- a histogram's samples always have a suffix: its bare name is not one of them
            when te.mtype in ('histogram', 'gaugehistogram') then [k.metric, '', 'untyped']
            when te.mtype is not null then [k.metric, '', te.mtype]
            when k.sfx in ('bucket', 'count', 'sum') and bb.base is not null
                then [k.base, k.sfx, 'histogram']
            when k.sfx = 'total' then [k.base, 'total', 'counter']
            else [k.metric, '', 'untyped']
        end as fam
    from keys as k
    left join types as tb on tb.family = k.base
    left join types as te on te.family = k.metric
    left join bucketed_bases as bb on bb.base = k.base
),

final as (
    select
        series_key,
        -- identity = family + suffix + sorted labels: `x_total` and a pipeline's bare `x` meet
        hash(fam[1] || '|' || fam[2] || '{' || array_to_string(
            list_transform(list_sort(map_keys(labels)), lambda k: k || '=' || labels[k]), ','
        ) || '}') as series_id,
        metric,
        fam[1] as family,
        fam[2] as suffix,
        fam[3] as mtype,
        labels,
        case when fam[2] = 'bucket' then try_cast(labels['le'] as double) end as le,
        hash(fam[1] || '{' || array_to_string(
            list_transform(
                list_filter(list_sort(map_keys(labels)), lambda k: k != 'le'),
                lambda k: k || '=' || labels[k]
            ), ','
        ) || '}') as group_id,
        -- Ray names a replica's process by its WorkerId (Ray Serve LLM's engines share `engine="0"`)
        concat_ws('/', labels['instance'], labels['pod'], labels['WorkerId'], labels['engine'], labels['dp_rank'])
            as replica
    from classified
)

select * from final
