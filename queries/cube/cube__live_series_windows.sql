-- name: cube__live_series_windows
-- purpose: the per-(series, window) rows of the selected live datasets at the cube's window, which
--   is a multiple of the window they were pulled at: increases and gauge sums and counts add up, the
--   gauge min and max are the min and max of the pulled windows (windows on one grid from the
--   origin, macros/windows, so a cube window holds whole pulled windows). The columns of
--   `cube__series_windows`; resets are the store's concern (increase() handles them per series).
-- grain: one row per (series_id, window_start)
-- reads: cube_series, live_windows
-- @param dataset_ids INTEGER[]  datasets to include
-- @param window_s INTEGER  the cube's window length in seconds
-- @returns series_id UBIGINT, window_start TIMESTAMP, increase DOUBLE, resets BIGINT,
--   gauge_min DOUBLE, gauge_sum DOUBLE, gauge_n BIGINT, gauge_max DOUBLE, first_counted BOOLEAN,
--   duplicates BIGINT
select
    lw.series_id,
    make_timestamp(window_start_us(
        window_index(epoch_us(lw.window_start) + 1, $window_s), $window_s
    )) as window_start,
    sum(lw.increase) as increase,
    0::bigint as resets,
    min(lw.gauge_min) as gauge_min,
    sum(lw.gauge_sum) as gauge_sum,
    sum(lw.gauge_n)::bigint as gauge_n,
    max(lw.gauge_max) as gauge_max,
    false as first_counted,
    0::bigint as duplicates
from live_windows as lw
where list_contains($dataset_ids, lw.dataset_id)
    and lw.series_id in (select series_id from cube_series)
group by all
