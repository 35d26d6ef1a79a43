-- name: ingest__text_time_comments
-- purpose: comment lines that hold only a timestamp, optionally after a word and `=` or `:`
--   (`# 2026-11-29T10:00:00Z`, `# scrape_time=1764410400`); the token is parsed in Python
--   (snapshot_time.parse_time_text), one string per snapshot
-- grain: one row per candidate comment line
-- reads: text_meta
-- @returns line_no BIGINT, token VARCHAR
with
candidates as (
    select
        line_no,
        regexp_extract(
            line, '^#[ \t]*(?:[A-Za-z_][A-Za-z0-9_.-]*[ \t]*[=:][ \t]*)?([0-9][0-9:.,+TtZz _-]*)[ \t]*$', 1
        ) as token
    from text_meta
    where kind = 'comment'
),

final as (
    select line_no, token from candidates where token <> '' order by line_no
)

select * from final
