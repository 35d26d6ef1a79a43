-- name: ingest__text_dialect
-- purpose: the marks of OpenMetrics in a text file's comment lines: `# EOF`, `# UNIT`, and types
--   that only OpenMetrics has (info, stateset, gaugehistogram, unknown)
-- grain: one row
-- reads: text_meta
-- @returns n_eof BIGINT, n_unit BIGINT, n_om_types BIGINT
with
final as (
    select
        count(*) filter (where kind = 'eof') as n_eof,
        count(*) filter (where kind = 'unit') as n_unit,
        count(*) filter (
            where kind = 'type' and mtype in ('info', 'stateset', 'gaugehistogram', 'unknown')
        ) as n_om_types
    from text_meta
)

select * from final
