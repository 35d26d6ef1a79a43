-- name: ingest__aiperf_summary
-- purpose: what the AIPerf reader left out, for the load notes: entries with a null value (NaN or
--   Inf written as null), entries with neither a value nor buckets, and lines without a time
-- grain: one row
-- reads: aiperf_entries
-- @returns n_null_values BIGINT, n_shapeless BIGINT, first_shapeless_family VARCHAR, n_lines BIGINT,
--   first_untimed_line BIGINT
with
final as (
    select
        count(*) filter (where has_value and value is null) as n_null_values,
        count(*) filter (where not has_value and buckets is null) as n_shapeless,
        min(family) filter (where not has_value and buckets is null) as first_shapeless_family,
        count(distinct line_no) as n_lines,
        min(line_no) filter (where ts is null) as first_untimed_line
    from aiperf_entries
)

select * from final
