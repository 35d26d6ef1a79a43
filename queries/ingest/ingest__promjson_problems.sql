-- name: ingest__promjson_problems
-- purpose: why a Prometheus API JSON file cannot be staged, first problem first: an error
--   response (with the server's error text), a result that holds no series (scalar, string), a
--   series without a metric name (an aggregation dropped `__name__`), a sample that is not a
--   [time, "value"] pair of numbers
-- grain: one row per problem (responses and series), the first `max_rows` only
-- reads: promjson_responses, promjson_series
-- @param max_rows BIGINT  how many problems to return
-- @returns response_no BIGINT, series_no BIGINT, series VARCHAR, problem VARCHAR, n_bad BIGINT
with
bad_responses as (
    select
        response_no,
        null::bigint as series_no,
        null as series,
        case
            when status = 'error' then 'the server returned an error: '
                || coalesce(error_type || ': ', '') || coalesce("error", '(no error text)')
            when result_type in ('scalar', 'string')
                then 'a ' || result_type || ' result holds no series: query an instant vector or a range'
            when result_type is null or result is null
                then 'not a Prometheus API response (no data.resultType/result)'
        end as problem
    from promjson_responses
),

bad_series as (
    select
        response_no,
        series_no,
        display as series,
        case
            when metric is null or metric = ''
                then 'the series has no metric name (__name__): export raw series, not an aggregation'
            when list_bool_or(list_transform(
                pairs,
                lambda p: len(p) <> 2 or try_cast(p[1] as double) is null or try_cast(p[2] as double) is null
            )) then 'a sample is not a [unix_time, "value"] pair of numbers'
        end as problem
    from promjson_series
),

all_bad as (
    select * from bad_responses where problem is not null
    union all
    select * from bad_series where problem is not null
),

final as (
    select *, count(*) over () as n_bad
    from all_bad
    order by response_no, series_no nulls first
    limit $max_rows
)

select * from final
