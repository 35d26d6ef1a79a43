-- name: records__joint_shares
-- purpose: the exact breach shares of a promise from per-request records: TTFT, TPOT and the joint
--   promise (a request breaches when any set threshold is exceeded, or it failed and failures count).
--   A request is in the range (start, end] when its first token (else its finish, else its arrival)
--   is, like the cube's left-open windows; a request still in flight is in the population; a request
--   with no time at all (a benchmark whose clock has no epoch) cannot be placed and is in every
--   range. Failed requests are in the population when failures count (each a breach), and left out
--   of it when they do not: the shares are then over the successful requests only.
-- grain: one row per path
-- reads: request_records
-- @param dataset_ids INTEGER[]  datasets whose records to use
-- @param promises STRUCT[]  list of {path, ttft_s, tpot_s, e2e_s, queue_s, target}; path '*' = every path
-- @param start_ts TIMESTAMP  inclusive
-- @param end_ts TIMESTAMP  exclusive
-- @param include_failed BOOLEAN  failed (abort/error) requests are in the population and breach the
--   joint promise; false: the population is the requests that did not fail
-- @returns path VARCHAR, requests BIGINT, failed_requests BIGINT, ttft_share DOUBLE, tpot_share DOUBLE,
--   joint_share DOUBLE
with
promise_list as (
    select unnest(
        cast($promises as struct(
            path varchar, ttft_s double, tpot_s double, e2e_s double, queue_s double, target double
        )[]),
        recursive := true
    )
),

records as (
    select *
    from request_records
    where list_contains($dataset_ids, dataset_id)
        and coalesce(
            coalesce(first_token, finish, arrival) > $start_ts and coalesce(first_token, finish, arrival) <= $end_ts,
            true
        )
        and ($include_failed or not coalesce(finished_reason in ('abort', 'error'), false))
),

with_promise as (
    select
        r.*,
        coalesce(own.ttft_s, star.ttft_s) as ttft_limit,
        coalesce(own.tpot_s, star.tpot_s) as tpot_limit,
        coalesce(own.e2e_s, star.e2e_s) as e2e_limit,
        coalesce(own.queue_s, star.queue_s) as queue_limit,
        coalesce(r.finished_reason in ('abort', 'error'), false) as failed
    from records as r
    left join promise_list as own on own.path = r.path
    left join promise_list as star on star.path = '*'
    where own.path is not null or star.path is not null
),

flagged as (
    select
        path,
        failed,
        coalesce(ttft_s > ttft_limit, false) as ttft_breach,
        coalesce(tpot_s > tpot_limit, false) as tpot_breach,
        coalesce(e2e_s > e2e_limit, false) or coalesce(queue_s > queue_limit, false) as other_breach
    from with_promise
),

final as (
    select
        path,
        count(*) as requests,
        count(*) filter (where failed) as failed_requests,
        avg(ttft_breach::int) as ttft_share,
        avg(tpot_breach::int) as tpot_share,
        avg((ttft_breach or tpot_breach or other_breach or ($include_failed and failed))::int) as joint_share
    from flagged
    group by path
    order by path
)

select * from final
