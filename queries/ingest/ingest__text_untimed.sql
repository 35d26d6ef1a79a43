-- name: ingest__text_untimed
-- purpose: the samples of a text exposition that carry no timestamp, each with its series identity
--   (its name and label set, whatever the label order of its line): what the snapshot checks
--   `ingest__text_comment_segments` and `ingest__text_second_snapshot` read
-- grain: one row per sample line without a timestamp
-- reads: text_keys, text_keys_slow, text_split
-- @returns line_no BIGINT, series_key VARCHAR
with
identities as (
    select series_key, identity from text_keys where problem is null
    union all
    select series_key, identity from text_keys_slow
    where problem is null and series_key not in (select series_key from text_keys)
),

final as (
    select s.line_no, i.identity as series_key
    from text_split as s
    inner join identities as i using (series_key)
    where s.ts_raw is null
)

select * from final
