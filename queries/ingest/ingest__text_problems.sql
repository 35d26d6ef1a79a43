-- name: ingest__text_problems
-- purpose: every malformed line of the staged text file, first line first: bad sample lines, bad
--   series keys (reported on each line that holds them) and malformed TYPE/HELP lines
-- grain: one row per bad line, the first `max_rows` lines only
-- reads: text_keys_slow, text_meta, text_slow
-- @param max_rows BIGINT  how many bad lines to return
-- @returns line_no BIGINT, problem VARCHAR, line VARCHAR, n_bad BIGINT
with
bad_samples as (
    select line_no, problem, line from text_slow where problem is not null
),

bad_slow_keys as (
    select s.line_no, k.problem, s.line
    from text_slow as s
    inner join text_keys_slow as k using (series_key)
    where s.class = 'sample' and s.problem is null and k.problem is not null
),

bad_meta as (
    select line_no, problem, line from text_meta where problem is not null
),

all_bad as (
    select * from bad_samples
    union all
    select * from bad_slow_keys
    union all
    select * from bad_meta
),

final as (
    select line_no, problem, line, count(*) over () as n_bad
    from all_bad
    order by line_no
    limit $max_rows
)

select * from final
