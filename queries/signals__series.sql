-- name: signals__series
-- purpose: the canonical signal(s) of each series held by the selected datasets, from the engine
--   metric map (data/signals.csv loaded as `signal_map`). Where several families of one engine give
--   the same signal (a renamed metric emitted under both names), each replica keeps only the
--   family with the best priority it exports, so nothing is counted twice.
-- grain: one row per (series_id, signal)
-- reads: path_rules, samples, series, signal_map
-- @param dataset_ids INTEGER[]  datasets to include
-- @param path_labels VARCHAR[]  labels whose values, joined with ' / ', name a series' path
-- @returns series_id UBIGINT, signal VARCHAR, kind VARCHAR, scale DOUBLE, suffix VARCHAR,
--   le DOUBLE, group_id UBIGINT, replica VARCHAR, path VARCHAR, engine VARCHAR, family VARCHAR
with
selected_series as (
    select s.*
    from series as s
    where s.series_id in (
        select distinct series_id from samples where list_contains($dataset_ids, dataset_id)
    )
),

rules as (
    select
        *,
        nullif(split_part(label_match, '=', 1), '') as match_label,
        nullif(split_part(label_match, '=', 2), '') as match_values
    from signal_map
),

matched as (
    select
        s.series_id,
        r.signal,
        r.kind,
        r.scale,
        s.suffix,
        s.le * r.scale as le,
        s.group_id,
        s.replica,
        s.labels,
        r.engine,
        s.family,
        r.priority
    from selected_series as s
    inner join rules as r
        on s.family = r.family
        and (
            r.match_label is null
            or regexp_full_match(coalesce(s.labels[r.match_label], ''), r.match_values)
        )
        -- a histogram signal takes its bucket, count, sum and created series; a counter its total
        -- and created; a gauge or info series has no suffix
        and (
            (r.kind = 'histogram' and s.suffix in ('bucket', 'count', 'sum', 'created'))
            or (r.kind = 'counter' and s.suffix in ('total', 'created', ''))
            or (r.kind in ('gauge', 'info') and s.suffix = '')
        )
),

best as (
    select
        *,
        min(priority) over (partition by replica, signal) as best_priority
    from matched
),

rules_ordered as (
    select pattern, path, position from path_rules
),

with_path as (
    select
        b.*,
        array_to_string(
            list_transform($path_labels, lambda l: coalesce(b.labels[l], '')), ' / '
        ) as path_key
    from best as b
    where b.priority = b.best_priority
),

final as (
    select
        w.series_id,
        w.signal,
        w.kind,
        w.scale,
        w.suffix,
        w.le,
        w.group_id,
        w.replica,
        coalesce(
            (
                select r.path from rules_ordered as r
                where regexp_full_match(w.path_key, r.pattern)
                order by r.position
                limit 1
            ),
            case when replace(w.path_key, ' / ', '') = '' then '(none)' else w.path_key end
        ) as path,
        w.engine,
        w.family
    from with_path as w
)

select * from final
