-- name: cube__replica_kept_samples
-- purpose: per replica, how many samples cube__sample_runs kept for the windows of its series: the
--   size of that replica's part of cube__series_windows (app/cube.py parts a large build by it)
-- grain: one row per replica of cube_series (NULL replicas as '')
-- reads: cube_sample_runs, cube_series
-- @returns replica VARCHAR, kept BIGINT
with
series_replica as (
    select distinct series_id, coalesce(replica, '') as replica from cube_series
)

select s.replica, count(r.series_id) as kept
from series_replica as s
left join cube_sample_runs as r using (series_id)
group by s.replica
order by kept desc, s.replica
