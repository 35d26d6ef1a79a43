-- name: ingest__text_second_snapshot
-- purpose: where a second snapshot starts among the samples without timestamps of a file that has
--   no timestamp comments: the first sample of a series that already appeared (a scrape loop's
--   expositions concatenated), or the first sample after a `# EOF` that follows samples
-- grain: at most one row
-- reads: text_meta, text_untimed
-- @returns line_no BIGINT, series_key VARCHAR, earlier_line BIGINT, reason VARCHAR
with
eofs as (
    select line_no, row_number() over (order by line_no) as eof_segment
    from text_meta
    where kind = 'eof'
),

segmented as (
    select u.line_no, u.series_key, coalesce(e.eof_segment, 0) as eof_segment
    from text_untimed as u
    asof left join eofs as e on u.line_no > e.line_no
),

repeated_series as (
    -- cheap first: which series appear more than once at all (usually none)
    select series_key from segmented group by series_key having count(*) > 1
),

repeats as (
    select
        line_no,
        series_key,
        lag(line_no) over (partition by series_key order by line_no) as earlier_line,
        'repeat' as reason
    from segmented
    where series_key in (select series_key from repeated_series)
),

after_eof as (
    select line_no, series_key, null::bigint as earlier_line, 'eof' as reason
    from segmented
    where eof_segment > (select min(eof_segment) from segmented)
),

final as (
    select * from (
        select * from repeats where earlier_line is not null
        union all
        select * from after_eof
    )
    order by line_no
    limit 1
)

select * from final
