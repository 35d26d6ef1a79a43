-- name: ingest__dataset_stats
-- purpose: size, time range and scrape interval of one dataset. The scrape interval is the median
--   gap between consecutive distinct sample times of a series, over the dataset's first 256 series.
-- grain: one row
-- reads: samples
-- @param dataset_id INTEGER  the dataset
-- @returns n_series BIGINT, n_samples BIGINT, t_min TIMESTAMP, t_max TIMESTAMP, scrape_interval_s DOUBLE
with
totals as (
    -- one pass over the dataset's samples
    select count(distinct series_id) as n_series, count(*) as n_samples, min(ts) as t_min, max(ts) as t_max
    from samples
    where dataset_id = $dataset_id
),

gaps as (
    -- the scrape interval is a median of gaps: 256 series tell it as well as every series does.
    -- A repeated time only adds a gap of 0, which the median skips: the positive gaps are those
    -- of the distinct times, so no DISTINCT over the series' samples is needed first (it would cost
    -- a pass more than the zero gaps it removes)
    select epoch(ts) - epoch(lag(ts) over (partition by series_id order by ts)) as gap_s
    from samples
    where dataset_id = $dataset_id and series_id in (
        select distinct series_id from samples where dataset_id = $dataset_id order by series_id limit 256
    )
),

final as (
    select n_series, n_samples, t_min, t_max, (select median(gap_s) from gaps where gap_s > 0) as scrape_interval_s
    from totals
)

select * from final
