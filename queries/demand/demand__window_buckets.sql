-- name: demand__window_buckets
-- purpose: per window and path, how many observations of one histogram signal fell in each bucket
--   (non-cumulative counts after the envelope repair). For TTFT they shift every window's first
--   tokens back to their arrival times (arrival = first token - TTFT); for prompt and output lengths
--   they keep which request sizes came when (a burst of long prompts is not spread over the day).
-- grain: one row per (window_start, path, le)
-- reads: cube_rows
-- @param cube_id INTEGER  a cube whose paths are traffic paths
-- @param signal VARCHAR  a histogram signal (ttft, prompt_tokens, generation_tokens, ...)
-- @returns window_start TIMESTAMP, path VARCHAR, le DOUBLE, lower_bound DOUBLE, requests DOUBLE
with
buckets as (
    select window_start, path, le, value
    from cube_rows
    where cube_id = $cube_id and signal = $signal and stat = 'increase' and le is not null
),

final as (
    select
        window_start,
        path,
        le,
        coalesce(lag(le) over w, 0) as lower_bound,
        value - coalesce(lag(value) over w, 0) as requests
    from buckets
    window w as (partition by window_start, path order by le)
    order by path, window_start, le
)

select * from final
