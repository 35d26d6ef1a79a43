-- name: ingest__text_slow_keys
-- purpose: the distinct raw series keys of the lines re-read by the slow path
-- grain: one row per distinct series_key
-- reads: text_slow
-- @returns series_key VARCHAR
with
final as (
    select distinct series_key from text_slow where class = 'sample' and problem is null
)

select * from final
