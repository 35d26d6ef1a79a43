-- name: ingest__vm_problems
-- purpose: the malformed lines of a VictoriaMetrics export, first line first
-- grain: one row per bad line, the first `max_rows` only
-- reads: vm_series
-- @param max_rows BIGINT  how many bad lines to return
-- @returns line_no BIGINT, display VARCHAR, problem VARCHAR, n_bad BIGINT
with
final as (
    select line_no, display, problem, count(*) over () as n_bad
    from vm_series
    where problem is not null
    order by line_no
    limit $max_rows
)

select * from final
