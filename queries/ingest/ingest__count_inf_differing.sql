-- name: ingest__count_inf_differing
-- purpose: the histograms of a stored dataset (the pairs of ingest__count_inf_pairs) whose `_count`
--   and `+Inf` bucket do not hold the same (time, value) samples: each of the two series' samples
--   counted and their 64-bit hashes summed (an exact integer sum, in no set order); equal counts
--   and sums mean the same samples, bar a chance match of the sums (odds about 2^-64 a histogram).
--   ingest__check_count_vs_inf compares only these scrape by scrape, on the staged samples with
--   their lines. The stored samples are the staged ones the checks kept (bad points left out, a
--   missing `+Inf` repaired), compressed: one read of them instead of a comparison of every staged
--   pair, which at a month's size is read back from disk.
-- grain: one row per histogram label set (group_id) whose `_count` and `+Inf` samples differ
-- reads: count_inf_pairs, samples
-- @param dataset_id INTEGER  the dataset just stored
-- @returns group_id UBIGINT
with
roles as (
    select count_id as series_id, group_id, true as is_count from count_inf_pairs
    union all
    select inf_id as series_id, group_id, false as is_count from count_inf_pairs
),

prints as (
    select r.group_id, r.is_count, count(*) as n, sum(hash(p.ts, p.value)) as h
    from samples as p
    inner join roles as r using (series_id)
    where p.dataset_id = $dataset_id
    group by r.group_id, r.is_count
),

final as (
    -- a series without samples left differs from one with some
    select group_id
    from prints
    group by group_id
    having count(*) < 2 or min(n) <> max(n) or min(h) <> max(h)
)

select * from final
