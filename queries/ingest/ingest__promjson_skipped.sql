-- name: ingest__promjson_skipped
-- purpose: the series that carried native histogram samples (`histograms`), skipped with a note
-- grain: one row
-- reads: promjson_series
-- @returns n_series BIGINT, series VARCHAR[]
with
final as (
    select
        count(*) as n_series,
        (list(distinct display order by display))[1:3] as series
    from promjson_series
    where has_histograms
)

select * from final
