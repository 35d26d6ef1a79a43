-- name: capacity__replica_windows
-- purpose: what one replica did in each window, from a cube whose paths are replicas (path labels
--   instance and engine): tokens generated and prefilled, steps (from the iteration-tokens
--   histogram when exported), the running/waiting/KV gauges, preemptions, finished requests and
--   the sums and counts of the latency histograms. The capacity model is fitted on these rows.
-- grain: one row per (window_start, replica)
-- reads: cube_rows
-- @param cube_id INTEGER  a cube built with path labels = the replica labels
-- @returns window_start TIMESTAMP, replica VARCHAR, generation_tokens DOUBLE, prompt_tokens DOUBLE,
--   steps DOUBLE, running_min DOUBLE, running_mean DOUBLE, running_max DOUBLE, waiting_mean DOUBLE,
--   waiting_max DOUBLE, kv_mean DOUBLE, kv_max DOUBLE, preemptions DOUBLE, finished DOUBLE,
--   ttft_count DOUBLE, ttft_sum DOUBLE, tpot_count DOUBLE, tpot_sum DOUBLE, queue_count DOUBLE,
--   queue_sum DOUBLE, prefill_count DOUBLE, prefill_sum DOUBLE, prompt_count DOUBLE,
--   prompt_sum DOUBLE, generation_count DOUBLE, generation_sum DOUBLE, prompt_sq_sum DOUBLE, resets DOUBLE
with
rows_ as (
    select window_start, path as replica, signal, stat, value
    from cube_rows
    where cube_id = $cube_id and le is null
),

prompt_buckets as (
    select
        window_start,
        path as replica,
        le,
        value - coalesce(lag(value) over w, 0) as n,
        coalesce(lag(le) over w, 0) as lower_bound
    from cube_rows
    where cube_id = $cube_id and signal = 'prompt_tokens' and stat = 'increase' and le is not null
    window w as (partition by window_start, path order by le)
),

-- sum of squared prompt lengths (the quadratic attention work of prefill), uniform inside a finite
-- bucket; the open top bucket at the mean its share of `_sum` implies (at least its lower bound)
prompt_squares as (
    select
        window_start,
        replica,
        sum(n * (lower_bound * lower_bound + lower_bound * le + le * le) / 3) filter (where isfinite(le))
            as finite_sq,
        sum(n * (lower_bound + le) / 2) filter (where isfinite(le)) as finite_sum,
        sum(n) filter (where not isfinite(le)) as top_n,
        max(lower_bound) filter (where not isfinite(le)) as top_lower
    from prompt_buckets
    group by all
),

final as (
    select
        window_start,
        replica,
        sum(value) filter (where signal = 'generation_tokens_total' and stat = 'increase') as generation_tokens,
        sum(value) filter (where signal = 'prompt_tokens_total' and stat = 'increase') as prompt_tokens,
        sum(value) filter (where signal = 'iteration_tokens' and stat = 'count') as steps,
        min(value) filter (where signal = 'running' and stat = 'min') as running_min,
        sum(value) filter (where signal = 'running' and stat = 'mean') as running_mean,
        max(value) filter (where signal = 'running' and stat = 'max') as running_max,
        sum(value) filter (where signal = 'waiting' and stat = 'mean') as waiting_mean,
        max(value) filter (where signal = 'waiting' and stat = 'max') as waiting_max,
        avg(value) filter (where signal = 'kv_usage' and stat = 'mean') as kv_mean,
        max(value) filter (where signal = 'kv_usage' and stat = 'max') as kv_max,
        sum(value) filter (where signal = 'preemptions' and stat = 'increase') as preemptions,
        sum(value) filter (where signal = 'requests' and stat = 'increase') as finished,
        sum(value) filter (where signal = 'ttft' and stat = 'count') as ttft_count,
        sum(value) filter (where signal = 'ttft' and stat = 'sum') as ttft_sum,
        sum(value) filter (where signal = 'tpot' and stat = 'count') as tpot_count,
        sum(value) filter (where signal = 'tpot' and stat = 'sum') as tpot_sum,
        sum(value) filter (where signal = 'queue' and stat = 'count') as queue_count,
        sum(value) filter (where signal = 'queue' and stat = 'sum') as queue_sum,
        sum(value) filter (where signal = 'prefill' and stat = 'count') as prefill_count,
        sum(value) filter (where signal = 'prefill' and stat = 'sum') as prefill_sum,
        sum(value) filter (where signal = 'prompt_tokens' and stat = 'count') as prompt_count,
        sum(value) filter (where signal = 'prompt_tokens' and stat = 'sum') as prompt_sum,
        sum(value) filter (where signal = 'generation_tokens' and stat = 'count') as generation_count,
        sum(value) filter (where signal = 'generation_tokens' and stat = 'sum') as generation_sum,
        any_value(sq.finite_sq) + coalesce(any_value(sq.top_n) * pow(greatest(
            any_value(sq.top_lower),
            (sum(value) filter (where signal = 'prompt_tokens' and stat = 'sum') - any_value(sq.finite_sum))
            / nullif(any_value(sq.top_n), 0)
        ), 2), 0) as prompt_sq_sum,
        sum(value) filter (where stat = 'resets') as resets
    from rows_
    left join prompt_squares as sq using (window_start, replica)
    group by window_start, replica
    order by replica, window_start
)

select * from final
