-- name: ingest__aiperf_samples
-- purpose: the samples of the AIPerf entries as the exposition would show them: a counter or gauge
--   entry is one sample named as its family; a histogram entry becomes `<family>_bucket{le}` per
--   bucket (cumulative, keyed by the `le` string; `+Inf` = count added when missing), `_count` and
--   `_sum`. Entries whose value is null (AIPerf writes NaN/Inf as null) are left out and counted.
--   The series key is the name, the target and the entry's labels text (plus `le`): exact, and cheap
--   per sample; the label map is built once per key in ingest__aiperf_keys.
-- grain: one row per sample
-- reads: aiperf_entries
-- @returns line_no BIGINT, series_key VARCHAR, metric VARCHAR, instance VARCHAR, labels MAP(VARCHAR, VARCHAR),
--   le VARCHAR, ts TIMESTAMP, value DOUBLE
with
plain as (
    select line_no, ts, family as metric, instance, labels, labels_key, null as le, value
    from aiperf_entries
    where has_value and value is not null
),

bucket_entries as (
    select line_no, ts, family, instance, labels, labels_key, unnest(map_entries(buckets)) as b
    from aiperf_entries
    where buckets is not null
),

buckets as (
    select
        line_no,
        ts,
        family || '_bucket' as metric,
        instance,
        labels,
        labels_key,
        case when try_cast(b.key as double) = 'inf'::double then '+Inf' else b.key end as le,
        b.value as value
    from bucket_entries
),

inf_buckets as (
    -- Prometheus histograms always have the +Inf bucket; add it from the count when it is missing
    select line_no, ts, family || '_bucket' as metric, instance, labels, labels_key, '+Inf' as le, count as value
    from aiperf_entries
    where buckets is not null
        and count is not null
        and not list_bool_or(list_transform(
            map_keys(buckets), lambda k: try_cast(k as double) = 'inf'::double
        ))
),

counts as (
    select line_no, ts, family || '_count' as metric, instance, labels, labels_key, null as le, count as value
    from aiperf_entries
    where buckets is not null and count is not null
),

sums as (
    select line_no, ts, family || '_sum' as metric, instance, labels, labels_key, null as le, sum as value
    from aiperf_entries
    where buckets is not null and sum is not null
),

all_samples as (
    select * from plain
    union all
    select * from buckets
    union all
    select * from inf_buckets
    union all
    select * from counts
    union all
    select * from sums
),

final as (
    select
        line_no,
        concat_ws(chr(31), metric, coalesce(instance, ''), labels_key, le) as series_key,
        metric,
        instance,
        labels,
        le,
        ts,
        value
    from all_samples
)

select * from final
