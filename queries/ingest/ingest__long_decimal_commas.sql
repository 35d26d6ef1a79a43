-- name: ingest__long_decimal_commas
-- purpose: how many values of a `;`-separated CSV were written with a decimal comma (read as a
--   decimal point by ingest__long_points), and the first line of one, for the load's note
-- grain: one row
-- reads: long_input
-- @returns n BIGINT, first_line BIGINT, example VARCHAR
with
final as (
    select
        count(*) as n,
        min(src_line) as first_line,
        arg_min(value_raw::varchar, src_line) as example
    from long_input
    where try_cast(value_raw as double) is null and contains(value_raw::varchar, ',')
)

select * from final
