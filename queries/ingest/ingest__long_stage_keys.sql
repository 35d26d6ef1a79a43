-- name: ingest__long_stage_keys
-- purpose: the valid series of a long-format file (stage_keys contract)
-- grain: one row per distinct series key
-- reads: long_keys
-- @returns series_key VARCHAR, metric VARCHAR, labels MAP(VARCHAR, VARCHAR)
with
final as (
    select series_key, metric, labels from long_keys where problem is null
)

select * from final
