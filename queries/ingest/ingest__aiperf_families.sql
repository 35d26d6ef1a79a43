-- name: ingest__aiperf_families
-- purpose: the families the AIPerf file shows to be histograms (entries with buckets); other types
--   are not recorded in the file and are left to the series classifier
-- grain: one row per histogram family
-- reads: aiperf_entries
-- @returns family VARCHAR, mtype VARCHAR, help VARCHAR
with
final as (
    select distinct family, 'histogram' as mtype, null::varchar as help
    from aiperf_entries
    where buckets is not null
)

select * from final
