-- name: ingest__text_comment_segments
-- purpose: check the snapshots delimited by timestamp comments (`text_snapshots`): samples
--   without a timestamp before the first comment, and a series appearing twice after one comment
--   (two snapshots under one time), first offending line first
-- grain: at most one row per problem kind
-- reads: text_snapshots, text_untimed
-- @returns line_no BIGINT, series_key VARCHAR, start_line BIGINT, earlier_line BIGINT, reason VARCHAR
with
assigned as (
    select u.line_no, u.series_key, s.start_line
    from text_untimed as u
    asof left join text_snapshots as s on u.line_no >= s.start_line
),

orphans as (
    select line_no, series_key, null::bigint as start_line, null::bigint as earlier_line,
        'before_first' as reason
    from assigned
    where start_line is null
    order by line_no
    limit 1
),

repeated as (
    -- cheap first: which (snapshot, series) pairs occur more than once (usually none)
    select start_line, series_key
    from assigned
    where start_line is not null
    group by start_line, series_key
    having count(*) > 1
),

repeats as (
    select line_no, series_key, start_line, earlier_line, 'repeat' as reason
    from (
        select
            a.*,
            lag(a.line_no) over (partition by a.start_line, a.series_key order by a.line_no) as earlier_line
        from assigned as a
        semi join repeated as r using (start_line, series_key)
    )
    where earlier_line is not null
    order by line_no
    limit 1
),

final as (
    select * from orphans
    union all
    select * from repeats
)

select * from final
