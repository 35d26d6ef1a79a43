-- name: macros/samples
-- purpose: the stored samples of some datasets between two row ids, in storage order, each beside
--   the rows before and after it in that order (an empty OVER: a streaming lag/lead, no sort; a
--   row at either end of the range has no neighbour there). cube__sample_runs reads the
--   datasets' rows as a union of such ranges: a streaming window runs on one thread, and the
--   ranges on every core.

-- rows lo_row <= rowid < hi_row of samples of dataset_ids (INTEGER[]): series_id, t_us (µs),
-- value, and the scan's previous and next rows' series_id, t_us (and the previous value)
create or replace macro sample_neighbours(dataset_ids, lo_row, hi_row) as table
    select
        series_id,
        epoch_us(ts) as t_us,
        value,
        lag(series_id) over () as scan_prev_series,
        lag(epoch_us(ts)) over () as scan_prev_us,
        lag(value) over () as scan_prev_value,
        lead(series_id) over () as scan_next_series,
        lead(epoch_us(ts)) over () as scan_next_us
    from samples
    where list_contains(dataset_ids, dataset_id) and rowid >= lo_row and rowid < hi_row;
