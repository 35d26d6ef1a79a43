-- name: ingest__text_stage_keys
-- purpose: the valid series keys of the text file (from the fast split and the slow path), in the
--   stage_keys contract shape
-- grain: one row per distinct raw series key
-- reads: text_keys, text_keys_slow
-- @returns series_key VARCHAR, metric VARCHAR, labels MAP(VARCHAR, VARCHAR)
with
fast_keys as (
    select series_key, metric, labels from text_keys where problem is null
),

slow_keys as (
    -- a key can be in both sets when some of its lines were re-read (e.g. trailing spaces)
    select series_key, metric, labels
    from text_keys_slow
    where problem is null and series_key not in (select series_key from fast_keys)
),

final as (
    select * from fast_keys
    union all
    select * from slow_keys
)

select * from final
