-- name: ingest__text_repeated_times
-- purpose: OpenMetrics only: a sample of a series at the same timestamp as an earlier sample of that
--   series, once the timestamp is truncated to nanoseconds (the reference parser's resolution), is a
--   repeat: the specification says the MetricPoint with the earliest timestamp MUST be used, and the
--   reference parser (prometheus_client) keeps the first and drops the others. Those repeats are
--   deleted from the split lines before staging; the caller counts them for a note.
-- grain: DML; deletes one row per repeated sample
-- reads: text_split
delete from text_split
where line_no in (
    select line_no
    from (
        select
            line_no,
            row_number() over (
                partition by series_key, cast(floor(ts_raw * 1e9) as hugeint) order by line_no
            ) as nth
        from text_split
        where ts_raw is not null and isfinite(ts_raw)
    )
    where nth > 1
)
