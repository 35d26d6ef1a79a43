-- name: capacity__scrape_intervals
-- purpose: what each replica did between two consecutive scrapes of it, from the series every vLLM
--   export holds: inter-token gaps (the ITL histogram's `_count` and `_sum` increases), tokens
--   generated and prefilled, steps (the iteration-tokens histogram's `_count`, when exported),
--   preemptions, prompt tokens served from the prefix cache (`cached_tokens`: the local prefix
--   cache's hits, else every cached prompt token; null where neither is exported), first tokens,
--   queue and prefill times (TTFT, queue-time and prefill-time
--   `_count`/`_sum`; prefill-time only where the engine exports it, vLLM 0.6.4+), and the running,
--   waiting and KV gauges at both ends. Short intervals see a steady batch: the step-time fit and the
--   twin's calibration read these rows. An interval in which any counter of the replica went down
--   (a restart) has `resets` > 0 and no increases. Reads the TEMP table `capacity_series`
--   (`signals__series` with the replica labels as path labels).
-- grain: one row per (replica, scrape time) after the replica's first scrape
-- reads: capacity_series, samples
-- @param dataset_ids INTEGER[]  datasets to read (one value per series and time: the highest)
-- @returns replica VARCHAR, ts TIMESTAMP, dt_s DOUBLE, itl_count DOUBLE, itl_sum DOUBLE,
--   generation_tokens DOUBLE, prompt_tokens DOUBLE, steps DOUBLE, preemptions DOUBLE, cached_tokens DOUBLE,
--   ttft_count DOUBLE,
--   ttft_sum DOUBLE, queue_count DOUBLE, queue_sum DOUBLE, prefill_count DOUBLE, prefill_sum DOUBLE,
--   running DOUBLE, running_before DOUBLE,
--   waiting DOUBLE, waiting_before DOUBLE, kv_usage DOUBLE, kv_before DOUBLE, resets BIGINT
with
wanted as (
    select
        series_id,
        path as replica,
        case
            when signal in ('running', 'waiting', 'kv_usage') then signal
            when signal in ('itl', 'ttft', 'queue', 'prefill') then signal || '_' || suffix
            when signal = 'iteration_tokens' then 'steps'
            else replace(signal, '_total', '')
        end as what,
        signal in ('running', 'waiting', 'kv_usage') as is_gauge,
        case when suffix = 'sum' or signal in ('running', 'waiting', 'kv_usage') then scale else 1 end as scale
    from capacity_series
    where (signal in ('itl', 'ttft', 'queue', 'prefill') and suffix in ('count', 'sum'))
        or (signal = 'iteration_tokens' and suffix = 'count')
        or (signal in ('generation_tokens_total', 'prompt_tokens_total', 'preemptions', 'prefix_cache_hits_total',
                       'prompt_tokens_cached_total') and suffix in ('total', ''))
        or (signal in ('running', 'waiting', 'kv_usage') and suffix = '')
),

picked as (
    -- the wanted series' samples only: the semi-join on series_id lets the scan skip the rest early
    select series_id, ts, value
    from samples
    where list_contains($dataset_ids, dataset_id) and series_id in (select series_id from wanted)
),

sequenced as (
    -- each series' value at a time and at its previous time, each the highest of the datasets holding
    -- it, from one sort of three narrow columns: the frames over the rows sharing a time take the
    -- highest, so no aggregate runs before the sort; one row per (series, time) is kept (whichever
    -- sorts last: its two values are those of its whole time)
    select
        series_id,
        ts,
        max(value) over this_time as value,
        max(value) over time_before as before,
        lead(ts) over by_time as ts_after
    from picked
    window
        by_time as (partition by series_id order by ts),
        this_time as (by_time groups between current row and current row),
        time_before as (by_time groups between 1 preceding and 1 preceding)
    qualify ts_after is distinct from ts
),

scaled as (
    -- the labels joined after the sort, so it moves no strings
    select w.replica, w.what, w.is_gauge, s.ts, s.value * w.scale as value, s.before * w.scale as before
    from sequenced as s
    inner join wanted as w using (series_id)
),

per_scrape as (
    select
        replica,
        ts,
        sum(value - before) filter (where not is_gauge and what = 'itl_count') as itl_count,
        sum(value - before) filter (where not is_gauge and what = 'itl_sum') as itl_sum,
        sum(value - before) filter (where what = 'generation_tokens') as generation_tokens,
        sum(value - before) filter (where what = 'prompt_tokens') as prompt_tokens,
        sum(value - before) filter (where what = 'steps') as steps,
        sum(value - before) filter (where what = 'preemptions') as preemptions,
        sum(value - before) filter (where what = 'prefix_cache_hits') as prefix_hits,
        sum(value - before) filter (where what = 'prompt_tokens_cached') as prompt_cached,
        sum(value - before) filter (where what = 'ttft_count') as ttft_count,
        sum(value - before) filter (where what = 'ttft_sum') as ttft_sum,
        sum(value - before) filter (where what = 'queue_count') as queue_count,
        sum(value - before) filter (where what = 'queue_sum') as queue_sum,
        sum(value - before) filter (where what = 'prefill_count') as prefill_count,
        sum(value - before) filter (where what = 'prefill_sum') as prefill_sum,
        sum(value) filter (where what = 'running') as running,
        sum(before) filter (where what = 'running') as running_before,
        sum(value) filter (where what = 'waiting') as waiting,
        sum(before) filter (where what = 'waiting') as waiting_before,
        avg(value) filter (where what = 'kv_usage') as kv_usage,
        avg(before) filter (where what = 'kv_usage') as kv_before,
        count(*) filter (where not is_gauge and value < before) as resets,
        count(*) filter (where before is not null) as with_before
    from scaled
    group by replica, ts
),

final as (
    select
        replica,
        ts,
        epoch(ts - lag(ts) over (partition by replica order by ts)) as dt_s,
        case when resets = 0 then itl_count end as itl_count,
        case when resets = 0 then itl_sum end as itl_sum,
        case when resets = 0 then generation_tokens end as generation_tokens,
        case when resets = 0 then prompt_tokens end as prompt_tokens,
        case when resets = 0 then steps end as steps,
        case when resets = 0 then preemptions end as preemptions,
        case when resets = 0 then coalesce(prefix_hits, prompt_cached) end as cached_tokens,
        case when resets = 0 then ttft_count end as ttft_count,
        case when resets = 0 then ttft_sum end as ttft_sum,
        case when resets = 0 then queue_count end as queue_count,
        case when resets = 0 then queue_sum end as queue_sum,
        case when resets = 0 then prefill_count end as prefill_count,
        case when resets = 0 then prefill_sum end as prefill_sum,
        running,
        running_before,
        waiting,
        waiting_before,
        kv_usage,
        kv_before,
        resets,
        with_before
    from per_scrape
)

select
    replica, ts, dt_s, itl_count, itl_sum, generation_tokens, prompt_tokens, steps, preemptions, cached_tokens, ttft_count,
    ttft_sum, queue_count, queue_sum, prefill_count, prefill_sum, running, running_before, waiting, waiting_before, kv_usage, kv_before, resets
from final
where with_before > 0 and dt_s is not null
order by replica, ts
