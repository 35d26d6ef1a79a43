-- name: summary__duplicates
-- purpose: the instants at which a just-staged file holds more than one sample of a series (found
--   by the cube build: cube_duplicate_series), with their lines and values; the cube
--   keeps the highest value of each. Instants with differing values first, then by first line.
-- grain: one row per (series, instant) with several samples, the first `max_rows` only
-- reads: cube_duplicate_series, series, stage_points, stage_series
-- @param max_rows BIGINT  how many to return
-- @returns series VARCHAR, ts TIMESTAMP, n_values BIGINT, kept DOUBLE, lines BIGINT[], vals DOUBLE[],
--   n_instants BIGINT, n_differing BIGINT
with
points as (
    select ss.series_id, p.ts, p.value, p.src_line
    from stage_points as p
    inner join stage_series as ss using (series_key)
    where ss.series_id in (select series_id from cube_duplicate_series)
),

instants as (
    select
        series_id,
        ts,
        count(distinct value) as n_values,
        max(value) as kept,
        list(src_line order by src_line) as lines,
        list(value order by src_line) as vals
    from points
    group by series_id, ts
    having count(*) > 1
),

final as (
    select
        series_text(s.metric, s.labels) as series,
        i.ts,
        i.n_values,
        i.kept,
        i.lines,
        i.vals,
        count(*) over () as n_instants,
        count(*) filter (where i.n_values > 1) over () as n_differing
    from instants as i
    inner join series as s using (series_id)
    order by i.n_values > 1 desc, i.lines[1]
    limit $max_rows
)

select * from final
