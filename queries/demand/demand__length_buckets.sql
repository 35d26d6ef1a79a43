-- name: demand__length_buckets
-- purpose: prompt and output length distributions per path over a range, as summed bucket
--   increases of the request_prompt_tokens / request_generation_tokens histograms, with the
--   count and sum (the sum pins the mean of the open top bucket)
-- grain: one row per (path, signal, le)
-- reads: cube_rows
-- @param cube_id INTEGER  a cube whose paths are traffic paths
-- @param start_ts TIMESTAMP  first window start included
-- @param end_ts TIMESTAMP  windows starting at or after this are excluded
-- @returns path VARCHAR, signal VARCHAR, le DOUBLE, cumulative DOUBLE, total_count DOUBLE, total_sum DOUBLE
with
rows_ as (
    select path, signal, le, stat, value
    from cube_rows
    where cube_id = $cube_id and window_start >= $start_ts and window_start < $end_ts
        and signal in ('prompt_tokens', 'generation_tokens')
),

buckets as (
    select path, signal, le, sum(value) as cumulative
    from rows_
    where stat = 'increase' and le is not null
    group by all
),

totals as (
    select
        path,
        signal,
        sum(value) filter (where stat = 'count') as total_count,
        sum(value) filter (where stat = 'sum') as total_sum
    from rows_
    group by all
),

final as (
    select b.path, b.signal, b.le, b.cumulative, t.total_count, t.total_sum
    from buckets as b
    inner join totals as t using (path, signal)
    order by b.path, b.signal, b.le
)

select * from final
