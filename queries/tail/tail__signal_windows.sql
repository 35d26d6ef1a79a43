-- name: tail__signal_windows
-- purpose: the early and scaling signals per window, fleet-wide: the per-replica mean and maximum of
--   the waiting queue, the running batch, KV-cache occupancy and GPU utilisation (the cube's gauge
--   mean is over a path's replica samples, i.e. per replica; engine-level series may sit on a path
--   of their own, so the paths that carry a gauge are averaged), and preemptions per replica per
--   minute (the preemption counter's increase over the fleet, / replicas, / minutes; NULL where no
--   preemption counter is exported)
-- grain: one row per window_start
-- reads: cube_rows
-- @param cube_id INTEGER  a cube of cube_rows
-- @param start_ts TIMESTAMP  first window start included
-- @param end_ts TIMESTAMP  windows starting at or after this are excluded
-- @param window_s DOUBLE  the cube's window length in seconds
-- @returns window_start TIMESTAMP, replicas DOUBLE, waiting DOUBLE, waiting_max DOUBLE, running DOUBLE,
--   running_max DOUBLE, kv_usage DOUBLE, kv_usage_max DOUBLE, gpu_util DOUBLE, gpu_util_max DOUBLE,
--   preemptions_per_replica_minute DOUBLE
with
rows_ as (
    select window_start, path, signal, stat, value
    from cube_rows
    where cube_id = $cube_id
      and window_start >= $start_ts
      and window_start < $end_ts
      and (
          (signal in ('waiting', 'running', 'kv_usage', 'gpu_util') and stat in ('mean', 'max'))
          or (signal = 'preemptions' and stat = 'increase')
          or (signal is null and stat = 'replicas')
      )
),

gauges as (
    select
        window_start,
        avg(value) filter (where signal = 'waiting' and stat = 'mean') as waiting,
        max(value) filter (where signal = 'waiting' and stat = 'max') as waiting_max,
        avg(value) filter (where signal = 'running' and stat = 'mean') as running,
        max(value) filter (where signal = 'running' and stat = 'max') as running_max,
        avg(value) filter (where signal = 'kv_usage' and stat = 'mean') as kv_usage,
        max(value) filter (where signal = 'kv_usage' and stat = 'max') as kv_usage_max,
        avg(value) filter (where signal = 'gpu_util' and stat = 'mean') as gpu_util,
        max(value) filter (where signal = 'gpu_util' and stat = 'max') as gpu_util_max,
        sum(value) filter (where signal = 'preemptions') as preemptions,
        count(*) filter (where signal = 'preemptions') as preemption_rows,
        max(value) filter (where stat = 'replicas') as replicas
    from rows_
    group by window_start
),

final as (
    select
        window_start,
        replicas,
        waiting,
        waiting_max,
        running,
        running_max,
        kv_usage,
        kv_usage_max,
        gpu_util,
        gpu_util_max,
        -- no preemption counter in the window: unknown, not zero
        case when replicas > 0 and preemption_rows > 0 then preemptions / replicas / ($window_s / 60.0) end
            as preemptions_per_replica_minute
    from gauges
    order by window_start
)

select * from final
