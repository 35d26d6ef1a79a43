-- name: signals__series
-- purpose: the canonical signal(s) of each series held by the selected datasets, from the engine
--   metric map (data/signals.csv loaded as `signal_map`). Where several families of one engine give
--   the same signal (a renamed metric emitted under both names), each replica keeps only the
--   family with the best priority it exports, so nothing is counted twice. A family no rule names
--   is matched under a re-exporter's prefix (Ray Serve LLM's `ray_vllm:time_to_first_token_seconds`
--   is vLLM's family under `ray_`): the longest known family it ends with after a prefix ending in
--   `_` or `:`, when that family is namespaced (`vllm:`) or a second known family sits under the
--   same prefix (so `vllm:request_max_num_generation_tokens` is not NIM's `generation_tokens`).
--   The path label `__model__` (the default) is the label the engine names its model with: the
--   first of model_name, model, model_id, served_model_name a series carries. A series with no
--   path label and no matching path rule (an engine-wide metric: `vllm:cache_config_info`, a GPU's
--   utilisation) takes the path of its replica's other series; a gauge or info series of a replica
--   serving several paths is counted in each; a counter or histogram there, or a series of a
--   replica with no labelled series, is path `(none)`.
-- grain: one row per (series_id, signal, path)
-- reads: live_windows, path_rules, samples, series, signal_map
-- @param dataset_ids INTEGER[]  datasets to include
-- @param path_labels VARCHAR[]  labels whose values, joined with ' / ', name a series' path
-- @returns series_id UBIGINT, signal VARCHAR, kind VARCHAR, scale DOUBLE, suffix VARCHAR,
--   le DOUBLE, group_id UBIGINT, replica VARCHAR, path VARCHAR, engine VARCHAR, family VARCHAR,
--   prefix VARCHAR
with
selected_series as (
    select s.*
    from series as s
    where s.series_id in (
        select distinct series_id from samples where list_contains($dataset_ids, dataset_id)
        union
        -- a live pull's series (app.live.pushdown): windows the store computed
        select distinct series_id from live_windows where list_contains($dataset_ids, dataset_id)
    )
),

rules as (
    select
        *,
        nullif(split_part(label_match, '=', 1), '') as match_label,
        nullif(split_part(label_match, '=', 2), '') as match_values
    from signal_map
),

known_families as (
    select distinct family as known from signal_map
),

selected_families as (
    select distinct family from selected_series
),

prefixed_candidates as (
    select
        f.family,
        k.known,
        left(f.family, length(f.family) - length(k.known)) as prefix
    from selected_families as f
    inner join known_families as k
        on length(f.family) > length(k.known) and suffix(f.family, k.known)
    where f.family not in (select known from known_families)
        and regexp_full_match(
            left(f.family, length(f.family) - length(k.known)), '[A-Za-z_:][A-Za-z0-9_:]*[_:]'
        )
),

accepted_prefixes as (
    select prefix
    from prefixed_candidates
    group by prefix
    having count(distinct known) >= 2 or bool_or(contains(known, ':'))
),

family_map as (
    -- from the map's side: a load's own series are not yet committed, so DuckDB has no distinct count
    -- of their families and would take each series for a family of its own; sized by the map, this
    -- stays the small side of the join with the series (10^6 series of one family: 9 s against 3.6 s)
    select known as family, known, '' as prefix
    from known_families
    where known in (select family from selected_families)
    union all
    select family, arg_max(known, length(known)) as known, arg_max(prefix, length(known)) as prefix
    from prefixed_candidates
    where prefix in (select prefix from accepted_prefixes)
    group by family
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
        fm.prefix,
        r.priority
    from selected_series as s
    inner join family_map as fm on s.family = fm.family
    inner join rules as r
        on fm.known = r.family
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
            list_transform(
                $path_labels,
                lambda l: case
                    when l = '__model__' then coalesce(
                        nullif(b.labels['model_name'], ''), nullif(b.labels['model'], ''),
                        nullif(b.labels['model_id'], ''), nullif(b.labels['served_model_name'], ''), ''
                    )
                    else coalesce(b.labels[l], '')
                end
            ),
            ' / '
        ) as path_key
    from best as b
    where b.priority = b.best_priority
),

ruled as (
    select
        w.*,
        coalesce(
            (
                select r.path from rules_ordered as r
                where regexp_full_match(w.path_key, r.pattern)
                order by r.position
                limit 1
            ),
            case when replace(w.path_key, ' / ', '') != '' then w.path_key end
        ) as named_path
    from with_path as w
),

replica_paths as (
    select replica, list(distinct named_path order by named_path) as paths
    from ruled
    where named_path is not null
    group by replica
),

engine_wide as (
    select
        w.*,
        unnest(
            case
                when rp.paths is null then ['(none)']
                when len(rp.paths) = 1 or w.kind in ('gauge', 'info') then rp.paths
                else ['(none)']
            end
        ) as path
    from ruled as w
    left join replica_paths as rp using (replica)
    where w.named_path is null
),

with_paths as (
    select *, named_path as path from ruled where named_path is not null
    union all by name
    select * from engine_wide
),

final as (
    select
        series_id,
        signal,
        kind,
        scale,
        suffix,
        le,
        group_id,
        replica,
        path,
        engine,
        family,
        prefix
    from with_paths
)

select * from final
