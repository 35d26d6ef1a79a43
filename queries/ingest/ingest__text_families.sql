-- name: ingest__text_families
-- purpose: the metric families declared by `# TYPE` lines, with the help text of their `# HELP`
--   line; 0.0.4 `untyped` is OpenMetrics `unknown`. A family with HELP but no TYPE is left out, so
--   the series classifier still infers its type from the sample names.
-- grain: one row per declared family
-- reads: text_meta
-- @returns family VARCHAR, mtype VARCHAR, help VARCHAR
with
types as (
    select family, any_value(case mtype when 'untyped' then 'unknown' else mtype end) as mtype
    from text_meta
    where kind = 'type' and problem is null
    group by family
),

helps as (
    select family, any_value(help) as help
    from text_meta
    where kind = 'help'
    group by family
),

final as (
    select t.family, t.mtype, h.help
    from types as t
    left join helps as h using (family)
)

select * from final
