-- name: macros/breach
-- purpose: how many observations lie above a threshold T, from one window's cumulative bucket
--   counts (methods.md 1.4); divided by n, the breach share. Inputs: n = count in the +Inf bucket;
--   c_at = cumulative count at a bound equal to T (NULL if T is not a bound); le_lo/c_lo = largest
--   finite bound below T and its cumulative count (NULL when T lies in the first bucket: the lower
--   edge is 0 with count 0); le_hi/c_hi = smallest finite bound above T (NULL when T is beyond the
--   last finite bound). Breach is x > T, matching the inclusive `le`. Counts, not shares, so that
--   windows add up: the share over a range is the sum of its windows' counts over the sum of n.

-- exact when T is a bound; else Prometheus' linear interpolation (histogram_fraction(T, +Inf));
-- beyond the last finite bound every +Inf observation counts as above T (the upper bound)
create or replace macro breached_estimate(n, t, c_at, le_lo, c_lo, le_hi, c_hi) as
    case
        when n is null or n <= 0 then null
        when c_at is not null then n - c_at
        when le_hi is null then n - coalesce(c_lo, 0)
        else n - (
            coalesce(c_lo, 0)
            + (c_hi - coalesce(c_lo, 0)) * (t - coalesce(le_lo, 0)) / (le_hi - coalesce(le_lo, 0))
        )
    end;

-- hard lower bound, whatever the distribution inside the bucket holding T
create or replace macro breached_low(n, c_at, c_hi) as
    case
        when n is null or n <= 0 then null
        when c_at is not null then n - c_at
        when c_hi is null then 0.0
        else n - c_hi
    end;

-- hard upper bound
create or replace macro breached_high(n, c_at, c_lo) as
    case
        when n is null or n <= 0 then null
        when c_at is not null then n - c_at
        else n - coalesce(c_lo, 0)
    end;

create or replace macro breach_counts_of(n, t, c_at, le_lo, c_lo, le_hi, c_hi) as
    struct_pack(
        n_obs := case when n > 0 then n end,
        bad := breached_estimate(n, t, c_at, le_lo, c_lo, le_hi, c_hi),
        bad_low := breached_low(n, c_at, c_hi),
        bad_high := breached_high(n, c_at, c_lo),
        exact := c_at is not null,
        -- observations above the threshold, at most (for the ITL request bound)
        above_high := n - coalesce(c_at, c_lo, 0)
    );

-- one window's breach counts of one histogram: `counts` its cumulative bucket counts in layout order,
-- `n_count` its _count (n when the +Inf bucket is missing), `pos` where the bounds around the
-- threshold sit in that layout (promise__shares: threshold, i_inf, i_at, le_lo, i_lo, le_hi, i_hi);
-- NULL when the histogram has no threshold. n_obs is n when the window has observations.
create or replace macro breach_counts(counts, n_count, pos) as
    case when pos is not null then breach_counts_of(
        coalesce(counts[pos.i_inf], n_count), pos.threshold,
        counts[pos.i_at], pos.le_lo, counts[pos.i_lo], pos.le_hi, counts[pos.i_hi]
    ) end;
