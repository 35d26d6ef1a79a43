-- name: ingest__text_fast_keys
-- purpose: the distinct raw series keys of the lines the fast split read cleanly (thousands of
--   keys for millions of lines: labels are parsed once per key, not once per line)
-- grain: one row per distinct series_key
-- reads: text_split
-- @returns series_key VARCHAR
with
final as (
    select distinct series_key from text_split where ok
)

select * from final
