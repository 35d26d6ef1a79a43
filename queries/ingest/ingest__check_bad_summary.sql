-- name: ingest__check_bad_summary
-- purpose: the dropped samples of `ingest__check_bad_points` (materialized as check_bad_points) by
--   reason, with the first few of each (series, time, value, line) for the load's note
-- grain: one row per reason, the reason met first first
-- reads: check_bad_points
-- @param n BIGINT  how many examples per reason
-- @returns reason VARCHAR, n_bad BIGINT, examples STRUCT(series VARCHAR, ts TIMESTAMP, "value" DOUBLE,
--   src_line BIGINT)[]
with
final as (
    select
        reason,
        count(*) as n_bad,
        list(struct_pack(series, ts, value, src_line) order by src_line)[1:$n] as examples
    from check_bad_points
    group by reason
    order by min(src_line)
)

select * from final
