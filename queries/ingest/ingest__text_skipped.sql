-- name: ingest__text_skipped
-- purpose: lines the text reader skips on purpose, for the load notes: lines holding only `...`
--   (an abbreviated paste, e.g. the vLLM docs example) and native histogram samples (not supported)
-- grain: one row per skipped class
-- reads: text_slow
-- @returns class VARCHAR, n_lines BIGINT, first_lines BIGINT[], series VARCHAR[]
with
skipped as (
    select class, line_no, series_key
    from text_slow
    where class in ('ellipsis', 'native_histogram')
),

final as (
    select
        class,
        count(*) as n_lines,
        (list(line_no order by line_no))[1:5] as first_lines,
        (list(distinct series_key order by series_key) filter (where series_key is not null))[1:3] as series
    from skipped
    group by class
    order by class
)

select * from final
